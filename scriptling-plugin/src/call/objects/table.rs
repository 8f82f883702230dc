//! [`ObjectTable`]: every live object of a session, by id, with its owner,
//! its last use, and a per-owner limit.
//!
//! - An id is exactly the string the plugin issued (`"7"` on stdio, 128
//!   random bits over HTTP); `"+7"` or `"007"` are unknown ids, never aliases.
//! - Over HTTP an object belongs to the client that created it: another
//!   client's id is as unknown as one that never existed, and each client
//!   may keep at most a set number alive.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::call::objects::{ClassInfo, Entry, EntryInner, ObjectCell};
use crate::support::lock;

/// How a table names new objects.
enum Ids {
    Sequential(AtomicU64),
    /// Unguessable ids, or why none could be made.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Generated(Box<dyn Fn() -> Result<String, String> + Send + Sync>),
}

/// The most objects one owner may keep alive, and what to tell one that
/// asks for more.
#[derive(Clone, Debug)]
pub(crate) struct Limit {
    pub(crate) most: usize,
    /// How to raise it (`SCRIPTLING_PLUGIN_MAX_OBJECTS`), for the message.
    pub(crate) setting: &'static str,
    /// Whom it limits (`connection`, `client`), for the message.
    pub(crate) owner: &'static str,
}

/// Every live object of a session.
pub(crate) struct ObjectTable {
    ids: Ids,
    state: Mutex<State>,
    limit: Option<Limit>,
    started: Instant,
}

#[derive(Default)]
struct State {
    entries: HashMap<Arc<str>, Entry>,
    /// Live objects per owner (only with a limit).
    owned: HashMap<Option<Arc<str>>, usize>,
}

impl ObjectTable {
    /// Ids `"1"`, `"2"`, ... never reused (stdio: one host, nothing to hide).
    pub(crate) fn sequential() -> Self {
        Self::with_ids(Ids::Sequential(AtomicU64::new(0)), None)
    }

    /// Sequential ids, at most `limit` objects alive (a TCP connection's:
    /// its table is its own, so ids hide nothing there either).
    pub(crate) fn sequential_limited(limit: Limit) -> Self {
        Self::with_ids(Ids::Sequential(AtomicU64::new(0)), Some(limit))
    }

    /// Ids from `generate`, which must never repeat itself (HTTP: random,
    /// so one client cannot guess another's), at most `limit` per owner.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn generated(
        generate: impl Fn() -> Result<String, String> + Send + Sync + 'static,
        limit: Option<Limit>,
    ) -> Self {
        Self::with_ids(Ids::Generated(Box::new(generate)), limit)
    }

    fn with_ids(ids: Ids, limit: Option<Limit>) -> Self {
        Self { ids, state: Mutex::new(State::default()), limit, started: Instant::now() }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Adds `value` as a new object of `class` owned by `owner`; `Err` says
    /// why it cannot be (the owner's limit, no id to give it), and `value`
    /// is then dropped as a plain value, its destroy hook not run.
    pub(crate) fn insert<T: Send + Sync + 'static>(
        &self,
        class: Arc<ClassInfo>,
        value: T,
        owner: Option<Arc<str>>,
    ) -> Result<Entry, String> {
        self.reserve(&class, &owner)?;
        let id: Arc<str> = match &self.ids {
            Ids::Sequential(next) => (next.fetch_add(1, Ordering::Relaxed) + 1).to_string().into(),
            Ids::Generated(generate) => match generate() {
                Ok(id) => id.into(),
                Err(e) => {
                    self.unreserve(&owner);
                    return Err(e);
                }
            },
        };
        let on_destroy = class.on_destroy.as_ref().and_then(|h| h.downcast_ref::<fn(&mut T)>()).copied();
        let entry = Entry(Arc::new(EntryInner {
            id: Arc::clone(&id),
            class,
            cell: Arc::new(ObjectCell::new(value, on_destroy)),
            owner,
            last_used: AtomicU64::new(self.now()),
        }));
        lock(&self.state).entries.insert(id, entry.clone());
        Ok(entry)
    }

    /// Takes a place among `owner`'s objects, if the limit leaves one.
    fn reserve(&self, class: &ClassInfo, owner: &Option<Arc<str>>) -> Result<(), String> {
        let Some(limit) = &self.limit else { return Ok(()) };
        let mut state = lock(&self.state);
        let count = state.owned.entry(owner.clone()).or_default();
        if *count >= limit.most {
            return Err(format!(
                "this {}'s object limit is reached: it has {} objects alive, the most it may keep ({}), so no {} \
                 can be created until it destroys one it no longer needs (release() in a script)",
                limit.owner, limit.most, limit.setting, class.name
            ));
        }
        *count += 1;
        Ok(())
    }

    fn unreserve(&self, owner: &Option<Arc<str>>) {
        if self.limit.is_some() {
            let mut state = lock(&self.state);
            Self::release_place(&mut state, owner);
        }
    }

    fn release_place(state: &mut State, owner: &Option<Arc<str>>) {
        if let Some(count) = state.owned.get_mut(owner) {
            *count -= 1;
            if *count == 0 {
                state.owned.remove(owner);
            }
        }
    }

    /// The live object with exactly this id, if `owner` may use it.
    pub(crate) fn get(&self, id: &str, owner: Option<&str>) -> Option<Entry> {
        let entry = lock(&self.state).entries.get(id).filter(|e| e.owner() == owner).cloned()?;
        entry.0.last_used.store(self.now(), Ordering::Relaxed);
        Some(entry)
    }

    /// Removes the object, if `owner` may use it; its hooks run when the
    /// returned entry (and any call still using it) is dropped.
    pub(crate) fn remove(&self, id: &str, owner: Option<&str>) -> Option<Entry> {
        let mut state = lock(&self.state);
        if state.entries.get(id)?.owner() != owner {
            return None;
        }
        let entry = state.entries.remove(id)?;
        self.forget_owned(&mut state, &entry);
        Some(entry)
    }

    /// Removes every object.
    pub(crate) fn drain(&self) -> Vec<Entry> {
        let mut state = lock(&self.state);
        state.owned.clear();
        state.entries.drain().map(|(_, e)| e).collect()
    }

    /// Removes the objects `owner` created.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn drain_owned_by(&self, owner: &str) -> Vec<Entry> {
        self.drain_where(|e| e.owner() == Some(owner))
    }

    /// Removes the objects no call has named for longer than `idle`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn drain_idle(&self, idle: Duration) -> Vec<Entry> {
        let idle = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        let now = self.now();
        self.drain_where(|e| now.saturating_sub(e.0.last_used.load(Ordering::Relaxed)) > idle)
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn drain_where(&self, doomed: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let mut state = lock(&self.state);
        let ids: Vec<Arc<str>> =
            state.entries.iter().filter(|(_, e)| doomed(e)).map(|(id, _)| Arc::clone(id)).collect();
        let removed: Vec<Entry> = ids.iter().filter_map(|id| state.entries.remove(id)).collect();
        for entry in &removed {
            self.forget_owned(&mut state, entry);
        }
        removed
    }

    fn forget_owned(&self, state: &mut State, entry: &Entry) {
        if self.limit.is_some() {
            Self::release_place(state, &entry.0.owner);
        }
    }

    /// Whether ids are generated to keep clients apart (HTTP), so errors
    /// must not say how many objects others have.
    pub(crate) fn isolates_owners(&self) -> bool {
        matches!(self.ids, Ids::Generated(_))
    }

    /// The number of live objects.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).entries.len()
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::any::TypeId;

    struct Thing;

    fn class() -> Arc<ClassInfo> {
        Arc::new(ClassInfo { name: "Thing".into(), type_id: TypeId::of::<Thing>(), on_destroy: None, index: 0 })
    }

    fn add(table: &ObjectTable, owner: Option<&str>) -> Result<Entry, String> {
        table.insert(class(), Thing, owner.map(Arc::from))
    }

    #[test]
    fn ids_are_exact_strings_and_owned() {
        let table = ObjectTable::sequential();
        let a = add(&table, None).unwrap();
        let b = add(&table, Some("alice")).unwrap();
        assert_eq!((a.id(), b.id()), ("1", "2"));
        for alias in ["+1", "01", "0001", " 1", "1.0"] {
            assert!(table.get(alias, None).is_none(), "{alias}");
        }
        assert!(table.get("1", None).is_some());
        assert!(table.get("2", None).is_none(), "another owner's object is unknown");
        assert!(table.get("2", Some("mallory")).is_none());
        assert!(table.remove("2", None).is_none());
        assert!(table.get("2", Some("alice")).is_some());
        assert_eq!(table.drain_owned_by("alice").len(), 1);
        assert_eq!(table.len(), 1);
        let generated = ObjectTable::generated(|| Ok("x".repeat(32)), None);
        assert_eq!(add(&generated, None).unwrap().id(), "x".repeat(32));
        let broken = ObjectTable::generated(|| Err("no randomness".into()), None);
        assert_eq!(add(&broken, None).err().unwrap(), "no randomness");
    }

    #[test]
    fn each_owner_keeps_at_most_the_limit_and_freed_places_come_back() {
        let next = AtomicU64::new(0);
        let limit = Limit { most: 2, setting: "SCRIPTLING_PLUGIN_MAX_OBJECTS", owner: "client" };
        let table = ObjectTable::generated(move || Ok(next.fetch_add(1, Ordering::Relaxed).to_string()), Some(limit));
        let first = add(&table, Some("alice")).unwrap();
        add(&table, Some("alice")).unwrap();
        let refused = add(&table, Some("alice")).err().unwrap();
        assert!(refused.starts_with("this client's object limit is reached: it has 2 objects alive"), "{refused}");
        assert!(refused.contains("SCRIPTLING_PLUGIN_MAX_OBJECTS"), "{refused}");
        // Others have their own allowance, anonymous clients share one.
        add(&table, Some("bob")).unwrap();
        add(&table, None).unwrap();
        assert!(table.remove(first.id(), Some("alice")).is_some());
        add(&table, Some("alice")).unwrap();
        assert_eq!(table.drain_owned_by("alice").len(), 2);
        add(&table, Some("alice")).unwrap();
    }

    #[test]
    fn idle_objects_expire() {
        let table = ObjectTable::sequential();
        let kept = add(&table, None).unwrap();
        let _idle = add(&table, None).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        table.get(kept.id(), None).unwrap();
        let expired = table.drain_idle(Duration::from_millis(20));
        assert_eq!(expired.iter().map(Entry::id).collect::<Vec<_>>(), ["2"]);
        assert_eq!(table.len(), 1);
    }
}
