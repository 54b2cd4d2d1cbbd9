//! A small bounded map from an id to bytes computed at a version, for answers that are expensive
//! to compute and cheap to prove unchanged (the review JSON: `review::answer::review_body`).
//!
//! An entry is only returned for the exact version it was stored under, so correctness rests on
//! the version, never on the cache: a stale entry is a miss. When full, the oldest entries go
//! first. Written here rather than taken from a crate because the eviction order hardly matters
//! (a miss costs one computation) and the whole of it is a map, a queue and two limits.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
};

use bytes::Bytes;
use chrono::NaiveDate;
use uuid::Uuid;

/// What an entry was computed at: the count of the id's committed changes, and the UTC day
/// (an answer may name "tomorrow", or read prices valid from a date).
pub type Version = (i64, NaiveDate);

pub struct VersionedCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Uuid, (Version, Bytes)>,
    /// Ids in the order they were first stored (the eviction order).
    order: VecDeque<Uuid>,
    bytes: usize,
}

impl VersionedCache {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_entries,
            max_bytes,
        }
    }

    /// The bytes stored for `id` at exactly `version`.
    pub fn get(&self, id: Uuid, version: Version) -> Option<Bytes> {
        let inner = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match inner.entries.get(&id) {
            Some((v, body)) if *v == version => Some(body.clone()),
            _ => None,
        }
    }

    /// Stores `body` for `id` at `version`, unless an entry of a later version is already there
    /// (two requests computed it at once and the newer one landed first).
    pub fn put(&self, id: Uuid, version: Version, body: Bytes) {
        if body.len() > self.max_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let size = body.len();
        match inner.entries.get(&id).map(|(v, old)| (*v, old.len())) {
            Some((v, _)) if v > version => return,
            Some((_, old_size)) => {
                inner.bytes -= old_size;
                inner.entries.insert(id, (version, body));
            }
            None => {
                inner.entries.insert(id, (version, body));
                inner.order.push_back(id);
            }
        }
        inner.bytes += size;
        while inner.entries.len() > self.max_entries || inner.bytes > self.max_bytes {
            let Some(oldest) = inner.order.pop_front() else { break };
            if let Some((_, gone)) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
    }

    #[test]
    fn an_entry_answers_only_for_its_own_version() {
        let cache = VersionedCache::new(10, 1 << 20);
        let id = Uuid::now_v7();
        cache.put(id, (3, day()), Bytes::from_static(b"at three"));
        assert_eq!(cache.get(id, (3, day())).as_deref(), Some(&b"at three"[..]));
        assert_eq!(cache.get(id, (4, day())), None, "a newer change is a miss");
        assert_eq!(
            cache.get(id, (3, day().succ_opt().unwrap())),
            None,
            "so is the next day"
        );
        // An older computation landing late does not replace a newer one.
        cache.put(id, (5, day()), Bytes::from_static(b"at five"));
        cache.put(id, (4, day()), Bytes::from_static(b"at four"));
        assert_eq!(cache.get(id, (5, day())).as_deref(), Some(&b"at five"[..]));
    }

    #[test]
    fn the_oldest_entries_go_when_a_limit_is_reached() {
        let cache = VersionedCache::new(2, 10);
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        cache.put(a, (1, day()), Bytes::from_static(b"aaaa"));
        cache.put(b, (1, day()), Bytes::from_static(b"bbbb"));
        cache.put(c, (1, day()), Bytes::from_static(b"cccc"));
        assert_eq!(cache.get(a, (1, day())), None, "three entries over a limit of two");
        assert!(cache.get(b, (1, day())).is_some() && cache.get(c, (1, day())).is_some());
        cache.put(a, (1, day()), Bytes::from_static(b"aaaaaaaa"));
        assert_eq!(cache.get(b, (1, day())), None, "4 + 4 + 8 bytes over a limit of 10");
        assert_eq!(cache.get(c, (1, day())), None);
        cache.put(b, (1, day()), Bytes::from(vec![0u8; 11]));
        assert_eq!(cache.get(b, (1, day())), None, "larger than the whole cache: not kept");
    }
}
