//! A bounded reader of server-sent events (the `text/event-stream` framing of OpenAI-style
//! streaming answers), fed the body's bytes as they arrive.
//!
//! Written here rather than taken from a crate because the load generator talks to endpoints it
//! does not trust: the common SSE crates buffer a line until its end comes, however long, and
//! rescan the buffer on each chunk (one 16 MB line cost 42 s of CPU and hundreds of MB). This one
//! keeps at most one line (≤ [`MAX_LINE_BYTES`]) and one event's data (≤ the same) across chunks,
//! scans each byte once, and stops at a budget of events, saying which bound was passed.
//! Keep-alives (comment lines, and blank lines that end no event) have a budget of their own
//! ([`MAX_KEEP_ALIVES`]): a healthy server sends one every 15–30 s while a request waits in its
//! queue, and those must not eat the events a short answer is allowed.
//!
//! It follows the WHATWG parsing rules that OpenAI-style servers rely on: lines end at LF, CR or
//! CRLF (a CRLF split between chunks counts once); `data:` lines of one event are joined with LF;
//! one space after the colon is dropped; a line starting with `:` is a comment; a blank line ends
//! the event (an event without data is not dispatched). Leniently, a last event whose blank line
//! never came is dispatched at the end of the body. An `error:` field, which llama.cpp's server
//! sent for an error in the middle of a stream until late 2025 (`error: {"code":500,…}`), is read
//! as an event named `error` carrying that value.

use std::{fmt, ops::ControlFlow};

/// The longest line, and the most data one event may carry.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most keep-alive lines one stream may send: one every 15 s for about 17 hours, far beyond
/// any request's timeout, and still a bound on a server that sends nothing else.
pub const MAX_KEEP_ALIVES: usize = 4096;

/// One dispatched event.
#[derive(Debug, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` field (empty when none was given).
    pub name: &'a str,
    /// The `data:` lines, joined with LF.
    pub data: &'a str,
}

/// The bound a stream passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exceeded {
    /// A line longer than this many bytes.
    Line(usize),
    /// One event's data longer than this many bytes.
    EventData(usize),
    /// More events (blank lines that end one, and fields other than `data:`) than this.
    Events(usize),
    /// More keep-alive lines (comments, blank lines that end no event) than this.
    KeepAlives(usize),
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Line(n) => write!(f, "an SSE line longer than {}", crate::figures::bytes(*n)),
            Exceeded::EventData(n) => write!(f, "an SSE event with more than {} of data", crate::figures::bytes(*n)),
            Exceeded::Events(n) => write!(f, "more than {n} SSE events"),
            Exceeded::KeepAlives(n) => write!(f, "more than {n} SSE keep-alive lines"),
        }
    }
}

/// Why reading stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop<T> {
    /// The handler asked to stop, with this.
    Handler(T),
    /// The stream passed a bound.
    Exceeded(Exceeded),
}

/// The reader's state between chunks.
#[derive(Debug)]
pub struct SseReader {
    max_line: usize,
    max_events: usize,
    /// The start of a line whose end has not arrived.
    partial: Vec<u8>,
    /// The last chunk ended in CR: an LF starting the next one ends nothing.
    after_cr: bool,
    at_start: bool,
    data: Vec<u8>,
    has_data: bool,
    name: String,
    events: usize,
    keep_alives: usize,
}

impl SseReader {
    /// A reader with the standard line bound and at most `max_events` events.
    pub fn new(max_events: usize) -> Self {
        Self::with_limits(MAX_LINE_BYTES, max_events)
    }

    pub fn with_limits(max_line: usize, max_events: usize) -> Self {
        Self {
            max_line,
            max_events,
            partial: Vec::new(),
            after_cr: false,
            at_start: true,
            data: Vec::new(),
            has_data: false,
            name: String::new(),
            events: 0,
            keep_alives: 0,
        }
    }

    /// Bytes held between chunks (the unfinished line and the unfinished event's data).
    pub fn buffered(&self) -> usize {
        self.partial.capacity() + self.data.capacity()
    }

    /// Reads `chunk`, calling `on_event` for each event it completes, until the handler breaks or
    /// a bound is passed.
    pub fn feed<T>(
        &mut self,
        mut chunk: &[u8],
        on_event: &mut impl FnMut(Event<'_>) -> ControlFlow<T>,
    ) -> Result<(), Stop<T>> {
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (line, rest) = chunk.split_at(end);
            let crlf = rest.len() > 1 && rest[0] == b'\r' && rest[1] == b'\n';
            if rest[0] == b'\r' && rest.len() == 1 {
                self.after_cr = true;
            }
            chunk = &rest[if crlf { 2 } else { 1 }..];
            if self.partial.is_empty() {
                self.check_line(line.len())?;
                self.line(line, on_event)?;
            } else {
                self.check_line(self.partial.len() + line.len())?;
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                let done = self.line(&whole, on_event);
                whole.clear();
                self.partial = whole;
                done?;
            }
        }
        self.check_line(self.partial.len() + chunk.len())?;
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    /// The body ended: a last line without its end, and an event without its blank line, are
    /// taken as they are.
    pub fn finish<T>(&mut self, on_event: &mut impl FnMut(Event<'_>) -> ControlFlow<T>) -> Result<(), Stop<T>> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, on_event)?;
        }
        self.dispatch(on_event)
    }

    fn check_line<T>(&self, len: usize) -> Result<(), Stop<T>> {
        if len > self.max_line {
            return Err(Stop::Exceeded(Exceeded::Line(self.max_line)));
        }
        Ok(())
    }

    fn count_keep_alive<T>(&mut self) -> Result<(), Stop<T>> {
        self.keep_alives += 1;
        if self.keep_alives > MAX_KEEP_ALIVES {
            return Err(Stop::Exceeded(Exceeded::KeepAlives(MAX_KEEP_ALIVES)));
        }
        Ok(())
    }

    fn count_event<T>(&mut self) -> Result<(), Stop<T>> {
        self.events += 1;
        if self.events > self.max_events {
            return Err(Stop::Exceeded(Exceeded::Events(self.max_events)));
        }
        Ok(())
    }

    /// Hands over the event read so far, if it has data, and starts the next.
    fn dispatch<T>(&mut self, on_event: &mut impl FnMut(Event<'_>) -> ControlFlow<T>) -> Result<(), Stop<T>> {
        if !std::mem::take(&mut self.has_data) {
            self.name.clear();
            return Ok(());
        }
        let data = String::from_utf8_lossy(&self.data);
        let flow = on_event(Event {
            name: &self.name,
            data: &data,
        });
        drop(data);
        self.data.clear();
        self.name.clear();
        match flow {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(t) => Err(Stop::Handler(t)),
        }
    }

    fn line<T>(
        &mut self,
        mut line: &[u8],
        on_event: &mut impl FnMut(Event<'_>) -> ControlFlow<T>,
    ) -> Result<(), Stop<T>> {
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            if self.has_data || !self.name.is_empty() {
                self.count_event()?;
            } else {
                self.count_keep_alive()?;
            }
            return self.dispatch(on_event);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field.is_empty() {
            return self.count_keep_alive();
        }
        if field == b"error" {
            self.count_event()?;
            self.name = "error".into();
        } else if field != b"data" {
            // `event:`, `id:`, `retry:` and unknown fields: each counts as an event, so that an
            // endless run of them ends as surely as one of data.
            self.count_event()?;
            if field == b"event" {
                self.name = String::from_utf8_lossy(value).into_owned();
            }
            return Ok(());
        }
        if self.has_data {
            if self.data.len() + 1 + value.len() > self.max_line {
                return Err(Stop::Exceeded(Exceeded::EventData(self.max_line)));
            }
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `body` fed in pieces of `piece` bytes, as (name, data): lines of at most
    /// 64 bytes, at most 100 events.
    fn read(body: &[u8], piece: usize) -> Result<Vec<(String, String)>, Exceeded> {
        read_with(SseReader::with_limits(64, 100), body, piece)
    }

    fn read_with(mut r: SseReader, body: &[u8], piece: usize) -> Result<Vec<(String, String)>, Exceeded> {
        let mut got = Vec::new();
        let mut on = |e: Event<'_>| {
            got.push((e.name.to_owned(), e.data.to_owned()));
            ControlFlow::<()>::Continue(())
        };
        let fed = body
            .chunks(piece)
            .try_for_each(|c| r.feed(c, &mut on))
            .and_then(|()| r.finish(&mut on));
        match fed {
            Ok(()) => Ok(got),
            Err(Stop::Exceeded(e)) => Err(e),
            Err(Stop::Handler(())) => unreachable!("the handler never stops"),
        }
    }

    fn events(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, d)| ((*n).to_owned(), (*d).to_owned())).collect()
    }

    #[test]
    fn events_are_the_same_however_the_body_is_cut() {
        let body = b"\xEF\xBB\xBFdata: {\"a\":1}\n\n: keep-alive\r\ndata:x\r\ndata:  y\r\n\r\nevent: error\rdata: boom\r\rid: 7\n\ndata\n\ndata: [DONE]";
        let want = events(&[
            ("", "{\"a\":1}"),
            ("", "x\n y"),
            ("error", "boom"),
            ("", ""),
            ("", "[DONE]"),
        ]);
        for piece in 1..=body.len() {
            assert_eq!(read(body, piece).unwrap(), want, "in pieces of {piece} bytes");
        }
    }

    #[test]
    fn a_line_over_the_bound_stops_with_the_bound_named_and_little_held() {
        let mut r = SseReader::with_limits(1 << 10, 100);
        let mut on = |_: Event<'_>| ControlFlow::<()>::Continue(());
        let mut body = b"data: ".to_vec();
        body.extend(std::iter::repeat_n(b'a', 16 << 10));
        let mut fed = 0;
        let err = body
            .chunks(100)
            .find_map(|c| {
                fed += c.len();
                let held = r.buffered();
                assert!(held <= 2 << 10, "holds {held} bytes");
                r.feed(c, &mut on).err()
            })
            .expect("stops");
        assert_eq!(err, Stop::Exceeded(Exceeded::Line(1 << 10)));
        assert!(fed <= (1 << 10) + 100, "stopped after {fed} bytes, not at the end");
        assert_eq!(
            Exceeded::Line(MAX_LINE_BYTES).to_string(),
            "an SSE line longer than 1 MiB"
        );
        // A long line inside one chunk is caught as well.
        let mut r = SseReader::with_limits(1 << 10, 100);
        body.push(b'\n');
        assert_eq!(r.feed(&body, &mut on), Err(Stop::Exceeded(Exceeded::Line(1 << 10))));
    }

    #[test]
    fn many_short_data_lines_cannot_make_one_huge_event() {
        let body = "data: 0123456789\n".repeat(10);
        assert_eq!(read(body.as_bytes(), 7), Err(Exceeded::EventData(64)));
        assert_eq!(
            Exceeded::EventData(64).to_string(),
            "an SSE event with more than 64 bytes of data"
        );
    }

    #[test]
    fn events_count_against_the_budget_and_keep_alives_against_their_own() {
        assert_eq!(read("data: x\n\n".repeat(100).as_bytes(), 9).unwrap().len(), 100);
        assert_eq!(
            read("data: x\n\n".repeat(101).as_bytes(), 9),
            Err(Exceeded::Events(100))
        );
        assert_eq!(
            read("event: x\n\n".repeat(51).as_bytes(), 5),
            Err(Exceeded::Events(100))
        );
        assert_eq!(Exceeded::Events(100).to_string(), "more than 100 SSE events");
        // A server that keeps the connection alive while the request waits in its queue (TGI and
        // axum send `:` every 15 s, llama.cpp every 30 s): a thousand pings, then one short answer.
        let queued = format!("{}data: x\n\ndata: [DONE]\n\n", ":\n\n".repeat(1000));
        let got = read(queued.as_bytes(), 5).unwrap();
        assert_eq!(got, events(&[("", "x"), ("", "[DONE]")]));
        // Nothing but keep-alives still ends.
        let endless = ": ping\n".repeat(MAX_KEEP_ALIVES + 1);
        assert_eq!(read(endless.as_bytes(), 64), Err(Exceeded::KeepAlives(MAX_KEEP_ALIVES)));
        let blank = "\n".repeat(MAX_KEEP_ALIVES + 1);
        assert_eq!(read(blank.as_bytes(), 64), Err(Exceeded::KeepAlives(MAX_KEEP_ALIVES)));
        assert_eq!(
            Exceeded::KeepAlives(MAX_KEEP_ALIVES).to_string(),
            "more than 4096 SSE keep-alive lines"
        );
    }

    #[test]
    fn an_error_field_is_an_error_event() {
        // llama.cpp's server before ggml-org/llama.cpp#16109 (b6530): a decode that fails after
        // tokens were sent.
        let body = b"data: {\"choices\":[{\"index\":0,\"text\":\" c\",\"finish_reason\":null}]}\n\nerror: {\"code\":500,\"message\":\"Compute error.\",\"type\":\"server_error\"}\n\ndata: [DONE]\n\n";
        let got = read_with(SseReader::new(10), body, 7).unwrap();
        assert_eq!(got[1].0, "error");
        assert_eq!(
            got[1].1,
            r#"{"code":500,"message":"Compute error.","type":"server_error"}"#
        );
        assert_eq!(got[2], ("".to_owned(), "[DONE]".to_owned()));
    }

    #[test]
    fn the_handler_can_stop_the_reading() {
        let mut r = SseReader::new(10);
        let mut seen = 0;
        let mut on = |e: Event<'_>| {
            seen += 1;
            if e.data == "[DONE]" {
                ControlFlow::Break("done")
            } else {
                ControlFlow::Continue(())
            }
        };
        assert_eq!(
            r.feed(b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n", &mut on),
            Err(Stop::Handler("done"))
        );
        assert_eq!(seen, 2);
    }
}
