//! The request body of a ledger CSV import as a blocking `Read`, so the pure parser
//! (`engine::ledger::csv::parse`, re-exported as `ledger::csv`) reads it while it streams in. The
//! async half lives here, in the server: the engine has no runtime.

use std::io::Read;

use bytes::Bytes;
use tokio::sync::mpsc;

/// A blocking `Read` over body chunks sent from the async side: the CSV parser runs on a blocking
/// thread and reads the request body as it arrives. A closed channel is the end of the body.
pub struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl ChannelReader {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            current: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}
