//! A small bounded map from a brief's id to bytes computed at a version, for answers that are expensive
//! to compute and cheap to prove unchanged (the review JSON: `review::answer::review_body`).
//!
//! An entry is only current for the exact version it was stored under, so correctness rests on
//! the version, never on the cache: a stale entry is never passed off as current. While one
//! request computes an id's newer answer, others asking for it are handed the previous one
//! ([`Lookup::Previous`]) instead of computing the same thing again, and so are they for a busy
//! interval after a computation others waited on: a brief being written to is computed one
//! request at a time and at most once an interval however many read it, and the caller says in
//! the answer that it is older. When full, the oldest entries go first. Written here rather than
//! taken from a crate because the eviction order hardly matters (a miss costs one computation) and
//! the whole of it is two maps, a queue and three limits.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use bytes::Bytes;
use chrono::NaiveDate;

use crate::ids::BriefId;

/// What an entry was computed at: the count of the id's committed changes, and the UTC day
/// (an answer may name "tomorrow", or read prices valid from a date).
pub type Version = (i64, NaiveDate);

/// What the cache holds for an id asked for at a version.
pub enum Lookup<'a> {
    /// Computed at that version (or at a later count the same day).
    Current(Bytes),
    /// Computed at an older version, handed out because another request is computing a newer one
    /// right now, or because this one was computed while others waited less than the busy
    /// interval ago.
    Previous(Bytes),
    /// Nothing usable: compute it and [`Computing::put`] it. Until the ticket is put or dropped,
    /// others asking for the id get [`Lookup::Previous`] where there is a previous answer.
    Compute(Computing<'a>),
}

/// A request's turn to compute an id's answer; dropping it unfinished (an error, a client gone)
/// lets the next request compute instead.
pub struct Computing<'a> {
    cache: &'a VersionedCache,
    id: BriefId,
}

impl Computing<'_> {
    pub fn put(self, version: Version, body: Bytes) {
        self.cache.put(self.id, version, body);
    }
}

impl Drop for Computing<'_> {
    fn drop(&mut self) {
        let mut inner = self.cache.lock();
        if let Some(flight) = inner.computing.get_mut(&self.id) {
            flight.requests -= 1;
            if flight.requests == 0 {
                inner.computing.remove(&self.id);
            }
        }
    }
}

pub struct VersionedCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
    busy_interval: Duration,
}

struct Entry {
    version: Version,
    body: Bytes,
    stored_at: Instant,
    /// Other requests asked for the id while this answer was computed (and got the one before).
    contended: bool,
}

#[derive(Default)]
struct InFlight {
    requests: u32,
    contended: bool,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<BriefId, Entry>,
    /// Ids in the order they were first stored (the eviction order).
    order: VecDeque<BriefId>,
    bytes: usize,
    /// The ids whose answer requests are computing now.
    computing: HashMap<BriefId, InFlight>,
}

impl VersionedCache {
    /// At most `max_entries` answers of at most `max_bytes` together. An id read by several
    /// requests at once while it changes (its answer's computation was contended) is computed
    /// again no sooner than `busy_interval` after: a sequential reader always gets its own write.
    pub fn new(max_entries: usize, max_bytes: usize, busy_interval: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_entries,
            max_bytes,
            busy_interval,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What is kept for `id` asked for at `version`: current; the previous answer while another
    /// request computes a newer one, or while a busy id's answer is younger than the busy
    /// interval; else the caller's turn to compute it.
    pub fn lookup(&self, id: BriefId, version: Version) -> Lookup<'_> {
        let mut guard = self.lock();
        let Inner { entries, computing, .. } = &mut *guard;
        if let Some(e) = entries.get(&id) {
            // A later count the same day is newer than the caller knew of: current all the same.
            if e.version.1 == version.1 && e.version.0 >= version.0 {
                return Lookup::Current(e.body.clone());
            }
            if let Some(flight) = computing.get_mut(&id) {
                flight.contended = true;
                return Lookup::Previous(e.body.clone());
            }
            if e.contended && e.stored_at.elapsed() < self.busy_interval {
                return Lookup::Previous(e.body.clone());
            }
        }
        computing.entry(id).or_default().requests += 1;
        Lookup::Compute(Computing { cache: self, id })
    }

    /// Stores `body` for `id` at `version`, unless an entry of a later version is already there
    /// (two requests computed it at once and the newer one landed first).
    fn put(&self, id: BriefId, version: Version, body: Bytes) {
        if body.len() > self.max_bytes {
            return;
        }
        let mut inner = self.lock();
        let contended = inner.computing.get(&id).is_some_and(|f| f.contended);
        let size = body.len();
        let entry = Entry {
            version,
            body,
            stored_at: Instant::now(),
            contended,
        };
        match inner.entries.get(&id).map(|e| (e.version, e.body.len())) {
            Some((v, _)) if v > version => return,
            Some((_, old_size)) => {
                inner.bytes -= old_size;
                inner.entries.insert(id, entry);
            }
            None => {
                inner.entries.insert(id, entry);
                inner.order.push_back(id);
            }
        }
        inner.bytes += size;
        while inner.entries.len() > self.max_entries || inner.bytes > self.max_bytes {
            let Some(oldest) = inner.order.pop_front() else { break };
            if let Some(gone) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.body.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
    }

    fn current(cache: &VersionedCache, id: BriefId, version: Version) -> Option<Bytes> {
        match cache.lookup(id, version) {
            Lookup::Current(body) => Some(body),
            _ => None,
        }
    }

    fn store(cache: &VersionedCache, id: BriefId, version: Version, body: &'static [u8]) {
        match cache.lookup(id, version) {
            Lookup::Compute(turn) => turn.put(version, Bytes::from_static(body)),
            _ => panic!("expected a turn to compute"),
        }
    }

    #[test]
    fn an_entry_is_current_only_for_its_own_version() {
        let cache = VersionedCache::new(10, 1 << 20, Duration::ZERO);
        let id = BriefId::from(Uuid::now_v7());
        store(&cache, id, (3, day()), b"at three");
        assert_eq!(current(&cache, id, (3, day())).as_deref(), Some(&b"at three"[..]));
        assert_eq!(
            current(&cache, id, (2, day())).as_deref(),
            Some(&b"at three"[..]),
            "newer than asked"
        );
        assert_eq!(current(&cache, id, (4, day())), None, "a newer change is a miss");
        assert_eq!(
            current(&cache, id, (3, day().succ_opt().unwrap())),
            None,
            "so is the next day"
        );
    }

    #[test]
    fn an_older_computation_landing_late_does_not_replace_a_newer_one() {
        let cache = VersionedCache::new(10, 1 << 20, Duration::ZERO);
        let id = BriefId::from(Uuid::now_v7());
        let (Lookup::Compute(slow), Lookup::Compute(fast)) =
            (cache.lookup(id, (4, day())), cache.lookup(id, (5, day())))
        else {
            panic!("no entry yet: both compute");
        };
        fast.put((5, day()), Bytes::from_static(b"at five"));
        slow.put((4, day()), Bytes::from_static(b"at four"));
        assert_eq!(current(&cache, id, (5, day())).as_deref(), Some(&b"at five"[..]));
    }

    #[test]
    fn while_one_request_computes_the_others_get_the_previous_answer() {
        let cache = VersionedCache::new(10, 1 << 20, Duration::ZERO);
        let id = BriefId::from(Uuid::now_v7());
        store(&cache, id, (1, day()), b"at one");
        let Lookup::Compute(turn) = cache.lookup(id, (2, day())) else {
            panic!("the first reader of a newer version computes it");
        };
        assert!(
            matches!(cache.lookup(id, (2, day())), Lookup::Previous(b) if &b[..] == b"at one"),
            "a second reader meanwhile is handed the previous answer"
        );
        turn.put((2, day()), Bytes::from_static(b"at two"));
        assert_eq!(current(&cache, id, (2, day())).as_deref(), Some(&b"at two"[..]));
        // A turn dropped unfinished (an error, a client gone) hands the turn to the next reader.
        let turn = cache.lookup(id, (3, day()));
        assert!(matches!(turn, Lookup::Compute(_)));
        assert!(matches!(cache.lookup(id, (3, day())), Lookup::Previous(_)));
        drop(turn);
        assert!(matches!(cache.lookup(id, (3, day())), Lookup::Compute(_)));
    }

    #[test]
    fn an_answer_whose_computation_kept_others_waiting_is_kept_for_the_busy_interval() {
        let cache = VersionedCache::new(10, 1 << 20, Duration::from_secs(3600));
        let (quiet, busy) = (BriefId::from(Uuid::now_v7()), BriefId::from(Uuid::now_v7()));
        // Read by one request at a time: every change is computed at once.
        store(&cache, quiet, (1, day()), b"quiet at one");
        store(&cache, quiet, (2, day()), b"quiet at two");
        assert_eq!(
            current(&cache, quiet, (2, day())).as_deref(),
            Some(&b"quiet at two"[..])
        );
        // Read by another while it was computed: the next change waits out the interval.
        store(&cache, busy, (1, day()), b"busy at one");
        let Lookup::Compute(turn) = cache.lookup(busy, (2, day())) else {
            panic!("a newer version is computed");
        };
        assert!(matches!(cache.lookup(busy, (2, day())), Lookup::Previous(_)));
        turn.put((2, day()), Bytes::from_static(b"busy at two"));
        assert!(
            matches!(cache.lookup(busy, (3, day())), Lookup::Previous(b) if &b[..] == b"busy at two"),
            "computed again no sooner than the interval"
        );
        assert_eq!(current(&cache, busy, (2, day())).as_deref(), Some(&b"busy at two"[..]));
    }

    #[test]
    fn the_oldest_entries_go_when_a_limit_is_reached() {
        let cache = VersionedCache::new(2, 10, Duration::ZERO);
        let (a, b, c) = (
            BriefId::from(Uuid::now_v7()),
            BriefId::from(Uuid::now_v7()),
            BriefId::from(Uuid::now_v7()),
        );
        store(&cache, a, (1, day()), b"aaaa");
        store(&cache, b, (1, day()), b"bbbb");
        store(&cache, c, (1, day()), b"cccc");
        assert_eq!(
            current(&cache, a, (1, day())),
            None,
            "three entries over a limit of two"
        );
        assert!(current(&cache, b, (1, day())).is_some() && current(&cache, c, (1, day())).is_some());
        store(&cache, a, (1, day()), b"aaaaaaaa");
        assert_eq!(
            current(&cache, b, (1, day())),
            None,
            "4 + 4 + 8 bytes over a limit of 10"
        );
        assert_eq!(current(&cache, c, (1, day())), None);
        store(&cache, b, (1, day()), &[0u8; 11]);
        assert_eq!(
            current(&cache, b, (1, day())),
            None,
            "larger than the whole cache: not kept"
        );
    }
}
