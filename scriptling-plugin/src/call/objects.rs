//! The remote object table: live instances of plugin classes, their ids,
//! their owners, and the access rules for calls on them.
//!
//! - An id is exactly the string the plugin issued (`"7"` on stdio, 128
//!   random bits over HTTP); `"+7"` or `"007"` are unknown ids, never aliases.
//! - Calls on different objects run concurrently. On one object, `&self`
//!   calls share it and `&mut self` calls get it alone.
//! - Waiting for an object never deadlocks on the host: if a call holding it
//!   is itself waiting for the host to answer a callback (which may be the
//!   very script now calling back into the same object), the new call fails
//!   at once with a message saying so, instead of waiting forever. Waiters
//!   are woken by every release and whenever a holder starts or stops
//!   waiting on the host; they never poll.
//! - Destroying an object removes it from the table at once; its `__del__`
//!   hook and `Drop` run when the last call using it has finished, exactly
//!   once.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::call::context::{self, CallScope, CallState, HostWaitListener};
use crate::call::error::CallError;
use crate::support::{lock, panic_message};
use crate::value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
use crate::value::{ObjectRef, Value};

/// The struct side of a plugin class: its Scriptling name and description.
///
/// `#[plugin_class]` on a struct implements it (and `IntoValue`, so methods
/// and functions can return new instances). A class must be `Send + Sync`:
/// calls on different threads may use the same object.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a plugin class",
    label = "`{Self}` does not implement `PluginClass`",
    note = "add `#[plugin_class]` to `struct {Self}`"
)]
pub trait PluginClass: Send + Sync + Sized + 'static {
    /// The class name Scriptling sees.
    const NAME: &'static str;
    /// The class's help text.
    const DESCRIPTION: &'static str = "";
    /// Scriptling source the host runs in place of its generated class
    /// (`#[plugin_class(wrapper = "...")]`); see
    /// [`Class::source`](crate::Class::source).
    const SOURCE: Option<&'static str> = None;
}

/// What the object table knows of a registered class.
pub(crate) struct ClassInfo {
    pub(crate) name: String,
    pub(crate) type_id: TypeId,
    /// A `fn(&mut T)` for the class's type: `__del__`.
    pub(crate) on_destroy: Option<Box<dyn Any + Send + Sync>>,
    /// Where the class's methods are registered (its index among the
    /// plugin's classes).
    pub(crate) index: usize,
}

/// One live object.
#[derive(Clone)]
pub(crate) struct Entry(Arc<EntryInner>);

struct EntryInner {
    id: Arc<str>,
    class: Arc<ClassInfo>,
    /// An `Arc<ObjectCell<T>>` for the class's type.
    cell: Arc<dyn Any + Send + Sync>,
    /// The client that created it (HTTP); only it may use the object.
    owner: Option<Arc<str>>,
    /// Milliseconds since the table was made, when a call last named it.
    last_used: AtomicU64,
}

impl Entry {
    pub(crate) fn id(&self) -> &str {
        &self.0.id
    }

    pub(crate) fn class(&self) -> &Arc<ClassInfo> {
        &self.0.class
    }

    pub(crate) fn remote_ref(&self, library: &str) -> ObjectRef {
        ObjectRef { library: library.to_owned(), class: self.0.class.name.clone(), id: self.0.id.to_string() }
    }
}

/// How a table names new objects.
enum Ids {
    Sequential(AtomicU64),
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Generated(Box<dyn Fn() -> String + Send + Sync>),
}

/// Every live object of a session.
pub(crate) struct ObjectTable {
    ids: Ids,
    entries: Mutex<HashMap<Arc<str>, Entry>>,
    started: Instant,
}

impl ObjectTable {
    /// Ids `"1"`, `"2"`, ... never reused (stdio: one host, nothing to hide).
    pub(crate) fn sequential() -> Self {
        Self::with_ids(Ids::Sequential(AtomicU64::new(0)))
    }

    /// Ids from `generate`, which must never repeat itself (HTTP: random,
    /// so one client cannot guess another's).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn generated(generate: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self::with_ids(Ids::Generated(Box::new(generate)))
    }

    fn with_ids(ids: Ids) -> Self {
        Self { ids, entries: Mutex::new(HashMap::new()), started: Instant::now() }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn insert<T: Send + Sync + 'static>(&self, class: Arc<ClassInfo>, value: T, owner: Option<Arc<str>>) -> Entry {
        let on_destroy = class.on_destroy.as_ref().and_then(|h| h.downcast_ref::<fn(&mut T)>()).copied();
        let id: Arc<str> = match &self.ids {
            Ids::Sequential(next) => (next.fetch_add(1, Ordering::Relaxed) + 1).to_string().into(),
            Ids::Generated(generate) => generate().into(),
        };
        let entry = Entry(Arc::new(EntryInner {
            id: Arc::clone(&id),
            class,
            cell: Arc::new(ObjectCell::new(value, on_destroy)),
            owner,
            last_used: AtomicU64::new(self.now()),
        }));
        lock(&self.entries).insert(id, entry.clone());
        entry
    }

    /// The live object with exactly this id, if `owner` may use it.
    pub(crate) fn get(&self, id: &str, owner: Option<&str>) -> Option<Entry> {
        let entry = lock(&self.entries).get(id).filter(|e| e.0.owner.as_deref() == owner).cloned()?;
        entry.0.last_used.store(self.now(), Ordering::Relaxed);
        Some(entry)
    }

    /// Removes the object, if `owner` may use it; its hooks run when the
    /// returned entry (and any call still using it) is dropped.
    pub(crate) fn remove(&self, id: &str, owner: Option<&str>) -> Option<Entry> {
        let mut entries = lock(&self.entries);
        if entries.get(id)?.0.owner.as_deref() != owner {
            return None;
        }
        entries.remove(id)
    }

    /// Removes every object.
    pub(crate) fn drain(&self) -> Vec<Entry> {
        lock(&self.entries).drain().map(|(_, e)| e).collect()
    }

    /// Removes the objects `owner` created.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn drain_owned_by(&self, owner: &str) -> Vec<Entry> {
        self.drain_where(|e| e.0.owner.as_deref() == Some(owner))
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
        let mut entries = lock(&self.entries);
        let ids: Vec<Arc<str>> = entries.iter().filter(|(_, e)| doomed(e)).map(|(id, _)| Arc::clone(id)).collect();
        ids.iter().filter_map(|id| entries.remove(id)).collect()
    }

    /// Whether ids are generated to keep clients apart (HTTP), so errors
    /// must not say how many objects others have.
    pub(crate) fn isolates_owners(&self) -> bool {
        matches!(self.ids, Ids::Generated(_))
    }

    /// The number of live objects.
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// Drops removed objects, reporting a panicking `__del__` or `Drop` on
/// stderr instead of letting it take the plugin down. Run it inside a call
/// scope and the hooks' log records reach the host.
pub(crate) fn release(entries: Vec<Entry>) {
    for entry in entries {
        let (class, id) = (entry.0.class.name.clone(), entry.id().to_owned());
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(entry))) {
            eprintln!("scriptling-plugin: destroying {class} object {id} panicked: {}", panic_message(&*p));
        }
    }
}

/// An instance and its destroy hook, which runs just before its `Drop`.
struct Instance<T> {
    value: T,
    on_destroy: Option<fn(&mut T)>,
}

impl<T> Drop for Instance<T> {
    fn drop(&mut self) {
        if let Some(hook) = self.on_destroy {
            hook(&mut self.value);
        }
    }
}

/// Who holds an object, and how.
#[derive(Default)]
struct Access {
    readers: usize,
    writer: bool,
    /// The calls holding a guard (one entry per guard).
    holders: Vec<Arc<CallState>>,
}

impl Access {
    fn holder_waiting_on_host(&self) -> bool {
        self.holders.iter().any(|c| c.is_waiting_on_host())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Shared,
    Exclusive,
}

/// The lock around one object.
///
/// `access` decides who may hold the object; the data sits in a tokio
/// `RwLock` only for its owned, `Send` guards, always taken with `try_*`
/// after `access` has granted it (a guard releases the data before it
/// updates `access`, so the `try_*` cannot fail).
pub(crate) struct ObjectCell<T> {
    data: Arc<RwLock<Instance<T>>>,
    access: Mutex<Access>,
    /// Blocking waiters.
    changed: Condvar,
    /// Async waiters.
    changed_async: Notify,
}

impl<T> ObjectCell<T> {
    fn new(value: T, on_destroy: Option<fn(&mut T)>) -> Self {
        Self {
            data: Arc::new(RwLock::new(Instance { value, on_destroy })),
            access: Mutex::new(Access::default()),
            changed: Condvar::new(),
            changed_async: Notify::new(),
        }
    }

    /// Grants `mode` if the object is free for it; `Err(())` if it is held
    /// by a call waiting on the host; `Ok(false)` to wait.
    fn try_grant(&self, access: &mut Access, mode: Mode, call: Option<&Arc<CallState>>) -> Result<bool, ()> {
        let free = match mode {
            Mode::Shared => !access.writer,
            Mode::Exclusive => !access.writer && access.readers == 0,
        };
        if free {
            match mode {
                Mode::Shared => access.readers += 1,
                Mode::Exclusive => access.writer = true,
            }
            if let Some(call) = call {
                access.holders.push(Arc::clone(call));
            }
            return Ok(true);
        }
        if access.holder_waiting_on_host() { Err(()) } else { Ok(false) }
    }

    fn release(&self, mode: Mode, call: Option<&Arc<CallState>>) {
        let mut access = lock(&self.access);
        match mode {
            Mode::Shared => access.readers -= 1,
            Mode::Exclusive => access.writer = false,
        }
        if let Some(call) = call {
            if let Some(i) = access.holders.iter().position(|c| Arc::ptr_eq(c, call)) {
                access.holders.swap_remove(i);
            }
        }
        drop(access);
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        self.changed.notify_all();
        self.changed_async.notify_waiters();
    }
}

impl<T: Send + Sync + 'static> HostWaitListener for ObjectCell<T> {
    fn holder_changed(&self) {
        // Taken so that a waiter between its check and its wait cannot miss this.
        drop(lock(&self.access));
        self.wake_waiters();
    }
}

/// A handle to a live object of class `T`: a `#[plugin_class]` method's
/// receiver, or a parameter that accepts an instance.
///
/// As a parameter, `Object<Counter>` accepts a Scriptling `Counter`
/// instance (sent as `{"type":"remote",...}`) and resolves it in the object
/// table; a wrong class or a destroyed object is an argument error.
/// Returned, it becomes the same remote value.
///
/// Access the object with [`read`](Object::read) / [`write`](Object::write)
/// from sync code, or [`read_async`](Object::read_async) /
/// [`write_async`](Object::write_async) from async code.
///
/// ```
/// use scriptling_plugin::{plugin_class, plugin_fn, CallError, Object};
///
/// #[plugin_class]
/// struct Account { balance: i64 }
///
/// #[plugin_class]
/// impl Account {
///     #[constructor]
///     fn new(balance: i64) -> Self { Account { balance } }
/// }
///
/// /// Moves money between two accounts.
/// #[plugin_fn]
/// fn transfer(from: Object<Account>, to: Object<Account>, amount: i64) -> Result<i64, CallError> {
///     from.write()?.balance -= amount;
///     let mut to = to.write()?;
///     to.balance += amount;
///     Ok(to.balance)
/// }
/// ```
pub struct Object<T> {
    entry: Entry,
    cell: Arc<ObjectCell<T>>,
    library: Arc<str>,
}

impl<T> Clone for Object<T> {
    fn clone(&self) -> Self {
        Self { entry: self.entry.clone(), cell: Arc::clone(&self.cell), library: Arc::clone(&self.library) }
    }
}

impl<T> fmt::Debug for Object<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Object<{}>({})", self.entry.0.class.name, self.entry.0.id)
    }
}

impl<T: PluginClass> Object<T> {
    pub(crate) fn from_entry(entry: Entry, library: Arc<str>) -> Option<Self> {
        let cell = Arc::clone(&entry.0.cell).downcast::<ObjectCell<T>>().ok()?;
        Some(Self { entry, cell, library })
    }

    /// The object's id, as the host knows it.
    pub fn id(&self) -> &str {
        &self.entry.0.id
    }

    /// The remote reference the host uses for this object.
    pub fn remote_ref(&self) -> ObjectRef {
        self.entry.remote_ref(&self.library)
    }

    fn busy(&self) -> CallError {
        CallError::about_call(format!(
            "{} object {} is in use by a call that is waiting on a callback; \
             calling back into the same object from that callback is not supported",
            self.entry.0.class.name, self.entry.0.id
        ))
    }

    /// Shared access, blocking until no `&mut` call holds the object. For
    /// sync code (sync handlers run on the SDK's own worker threads).
    pub fn read(&self) -> Result<ObjectReadGuard<T>, CallError> {
        let holder = self.acquire_blocking(Mode::Shared)?;
        let guard = Arc::clone(&self.cell.data).try_read_owned().expect("access was granted");
        Ok(ObjectReadGuard { guard, _holder: holder })
    }

    /// Exclusive access, blocking until no other call holds the object.
    pub fn write(&self) -> Result<ObjectWriteGuard<T>, CallError> {
        let holder = self.acquire_blocking(Mode::Exclusive)?;
        let guard = Arc::clone(&self.cell.data).try_write_owned().expect("access was granted");
        Ok(ObjectWriteGuard { guard, _holder: holder })
    }

    /// Shared access from async code.
    pub async fn read_async(&self) -> Result<ObjectReadGuard<T>, CallError> {
        let holder = self.acquire_async(Mode::Shared).await?;
        let guard = Arc::clone(&self.cell.data).try_read_owned().expect("access was granted");
        Ok(ObjectReadGuard { guard, _holder: holder })
    }

    /// Exclusive access from async code.
    pub async fn write_async(&self) -> Result<ObjectWriteGuard<T>, CallError> {
        let holder = self.acquire_async(Mode::Exclusive).await?;
        let guard = Arc::clone(&self.cell.data).try_write_owned().expect("access was granted");
        Ok(ObjectWriteGuard { guard, _holder: holder })
    }

    fn acquire_blocking(&self, mode: Mode) -> Result<Holder<T>, CallError> {
        let call = context::current().map(|s| s.call);
        let mut access = lock(&self.cell.access);
        loop {
            match self.cell.try_grant(&mut access, mode, call.as_ref()) {
                Ok(true) => {
                    drop(access);
                    return Ok(self.holder(mode, call));
                }
                Ok(false) => access = self.cell.changed.wait(access).unwrap_or_else(|p| p.into_inner()),
                Err(()) => return Err(self.busy()),
            }
        }
    }

    async fn acquire_async(&self, mode: Mode) -> Result<Holder<T>, CallError> {
        let call = context::current().map(|s| s.call);
        loop {
            // Registered before the check, so a wake-up between the two is kept.
            let mut changed = pin!(self.cell.changed_async.notified());
            changed.as_mut().enable();
            let granted = self.cell.try_grant(&mut lock(&self.cell.access), mode, call.as_ref());
            match granted {
                Ok(true) => return Ok(self.holder(mode, call)),
                Ok(false) => changed.await,
                Err(()) => return Err(self.busy()),
            }
        }
    }

    fn holder(&self, mode: Mode, call: Option<Arc<CallState>>) -> Holder<T> {
        let listener: Arc<dyn HostWaitListener> = self.cell.clone();
        if let Some(call) = &call {
            call.listen(Arc::clone(&listener));
        }
        Holder { mode, call, cell: Arc::clone(&self.cell), listener }
    }
}

/// Gives a guard's access back and wakes waiters.
struct Holder<T> {
    mode: Mode,
    call: Option<Arc<CallState>>,
    cell: Arc<ObjectCell<T>>,
    listener: Arc<dyn HostWaitListener>,
}

impl<T> Drop for Holder<T> {
    fn drop(&mut self) {
        if let Some(call) = &self.call {
            call.unlisten(&self.listener);
        }
        self.cell.release(self.mode, self.call.as_ref());
    }
}

/// Shared access to an object (see [`Object::read`]).
pub struct ObjectReadGuard<T> {
    // Field order matters: the data is released before access is given back.
    guard: OwnedRwLockReadGuard<Instance<T>>,
    _holder: Holder<T>,
}

/// Exclusive access to an object (see [`Object::write`]).
pub struct ObjectWriteGuard<T> {
    guard: OwnedRwLockWriteGuard<Instance<T>>,
    _holder: Holder<T>,
}

impl<T> Deref for ObjectReadGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

impl<T> Deref for ObjectWriteGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

impl<T> DerefMut for ObjectWriteGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard.value
    }
}

impl<T: PluginClass> FromValue for Object<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        let Value::Remote(remote) = value else {
            return Err(FromValueError::mismatch(&Self::expected(), &value));
        };
        let Some(scope) = context::current() else {
            return Err(FromValueError::message("can only be resolved while the plugin is serving a call"));
        };
        let link = &scope.link;
        let Some(entry) = link.objects.get(&remote.id, scope.owner.as_deref()) else {
            return Err(FromValueError::message(format!(
                "must be a live {} object, but object {} does not exist or has been destroyed",
                T::NAME,
                remote.id
            )));
        };
        if entry.0.class.type_id != TypeId::of::<T>() {
            return Err(FromValueError::message(format!(
                "must be a {} object, got a {} object",
                T::NAME,
                entry.0.class.name
            )));
        }
        Object::from_entry(entry, Arc::clone(&link.library))
            .ok_or_else(|| FromValueError::message("has the wrong type"))
    }

    fn expected() -> std::borrow::Cow<'static, str> {
        format!("a {} object", T::NAME).into()
    }
}

impl<T> IntoValue for Object<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Remote(self.entry.remote_ref(&self.library)))
    }
}

/// Inserts a new instance of `T` into the current call's object table and
/// returns its remote value. This is what a `#[plugin_class]` type's
/// `IntoValue` does; hand-written classes call it from theirs.
///
/// ```
/// use scriptling_plugin::{into_remote, IntoValue, IntoValueError, PluginClass, Value};
///
/// struct Token(String);
///
/// impl PluginClass for Token {
///     const NAME: &'static str = "Token";
/// }
///
/// impl IntoValue for Token {
///     fn into_value(self) -> Result<Value, IntoValueError> {
///         into_remote(self)
///     }
/// }
///
/// // Outside a call there is no table to put it in:
/// let err = Token("x".into()).into_value().unwrap_err();
/// assert_eq!(err.to_string(), "a Token instance can only be returned while the plugin is serving a call");
/// ```
pub fn into_remote<T: PluginClass>(value: T) -> Result<Value, IntoValueError> {
    let Some(CallScope { link, owner, .. }) = context::current() else {
        return Err(IntoValueError::new(format!(
            "a {} instance can only be returned while the plugin is serving a call",
            T::NAME
        )));
    };
    let Some(class) = link.class_for(TypeId::of::<T>()) else {
        return Err(IntoValueError::new(format!(
            "class {} is not registered with this plugin: add `.class::<{}>()`",
            T::NAME,
            crate::support::short_type_name::<T>()
        )));
    };
    let entry = link.objects.insert(Arc::clone(class), value, owner);
    Ok(Value::Remote(entry.remote_ref(&link.library)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    struct Thing(i64);

    impl PluginClass for Thing {
        const NAME: &'static str = "Thing";
    }

    fn class() -> Arc<ClassInfo> {
        Arc::new(ClassInfo { name: "Thing".into(), type_id: TypeId::of::<Thing>(), on_destroy: None, index: 0 })
    }

    fn object(table: &ObjectTable, owner: Option<&str>) -> Object<Thing> {
        let entry = table.insert(class(), Thing(1), owner.map(Arc::from));
        Object::from_entry(entry, "lib".into()).unwrap()
    }

    #[test]
    fn ids_are_exact_strings_and_owned() {
        let table = ObjectTable::sequential();
        let a = object(&table, None);
        let b = object(&table, Some("alice"));
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
        let generated = ObjectTable::generated(|| "x".repeat(32));
        assert_eq!(object(&generated, None).id(), "x".repeat(32));
    }

    #[test]
    fn idle_objects_expire() {
        let table = ObjectTable::sequential();
        let kept = object(&table, None);
        let _idle = object(&table, None);
        std::thread::sleep(Duration::from_millis(30));
        table.get(kept.id(), None).unwrap();
        let expired = table.drain_idle(Duration::from_millis(20));
        assert_eq!(expired.iter().map(Entry::id).collect::<Vec<_>>(), ["2"]);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn readers_share_and_writers_wait_without_polling() {
        let table = ObjectTable::sequential();
        let obj = object(&table, None);
        let r1 = obj.read().unwrap();
        let r2 = obj.read().unwrap();
        assert_eq!(r1.0 + r2.0, 2);
        let (tx, rx) = mpsc::channel();
        let writer = {
            let obj = obj.clone();
            std::thread::spawn(move || {
                let mut w = obj.write().unwrap();
                w.0 = 5;
                tx.send(()).unwrap();
            })
        };
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "the writer waits for the readers");
        drop(r1);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        drop(r2);
        // Woken by the release itself: well within the old 10 ms re-check.
        rx.recv_timeout(Duration::from_secs(5)).expect("woken by the release");
        writer.join().unwrap();
        assert_eq!(obj.read().unwrap().0, 5);
    }

    #[test]
    fn a_holder_waiting_on_the_host_makes_waiters_fail_fast() {
        let table = ObjectTable::sequential();
        let obj = object(&table, None);
        let holder_call = CallState::new("Thing.hold".into());
        let runtime = Arc::new(std::sync::OnceLock::new());
        let link = Arc::new(crate::call::link::Link::new("lib".into(), ObjectTable::sequential(), [], None, runtime));
        let scope = CallScope { link, call: Arc::clone(&holder_call), owner: None };
        let guard = {
            let _entered = context::enter(scope);
            obj.write().unwrap()
        };
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let obj = obj.clone();
            std::thread::spawn(move || tx.send(obj.read().map(|_| ()).map_err(|e| e.message().to_owned())).unwrap())
        };
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "an ordinary holder is waited for");
        let waiting = holder_call.wait_on_host();
        let refused = rx.recv_timeout(Duration::from_secs(5)).expect("woken when the holder started waiting");
        assert!(refused.unwrap_err().contains("is in use by a call that is waiting on a callback"));
        waiter.join().unwrap();
        drop(waiting);
        drop(guard);
        assert!(obj.read().is_ok());
    }

    #[tokio::test]
    async fn async_waiters_are_woken_by_releases() {
        let table = ObjectTable::sequential();
        let obj = object(&table, None);
        let guard = obj.write_async().await.unwrap();
        let waiter = tokio::spawn({
            let obj = obj.clone();
            async move { obj.read_async().await.map(|g| g.0) }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").unwrap();
        assert_eq!(got.unwrap(), 1);
    }

    #[test]
    fn hooks_run_once_when_the_last_user_lets_go() {
        static DESTROYED: AtomicU64 = AtomicU64::new(0);
        fn hook(t: &mut Thing) {
            DESTROYED.fetch_add(t.0 as u64, Ordering::SeqCst);
        }
        let hook: fn(&mut Thing) = hook;
        let class = Arc::new(ClassInfo {
            name: "Thing".into(),
            type_id: TypeId::of::<Thing>(),
            on_destroy: Some(Box::new(hook)),
            index: 0,
        });
        let table = ObjectTable::sequential();
        let entry = table.insert(class, Thing(3), None);
        let obj: Object<Thing> = Object::from_entry(entry, "lib".into()).unwrap();
        let guard = obj.read().unwrap();
        release(table.drain());
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 0, "still in use");
        drop(guard);
        drop(obj);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 3);
    }
}
