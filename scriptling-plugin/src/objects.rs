//! The remote object table: live instances of plugin classes, their ids,
//! and the access rules for calls on them.
//!
//! - Ids are decimal strings from a process-wide counter, never reused.
//! - Calls on different objects run concurrently. On one object, `&self`
//!   calls share it and `&mut self` calls get it alone.
//! - Waiting for an object never deadlocks on the host: if the call holding
//!   it is itself waiting for the host to answer a callback (which may be
//!   the very script now calling back into the same object), the new call
//!   fails at once with a message saying so, instead of waiting forever.
//! - Destroying an object removes it from the table at once; its
//!   `__del__` hook and `Drop` run when the last call using it has finished,
//!   exactly once.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::class::{ClassEntry, PluginClass};
use crate::context::{self, CallState};
use crate::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
use crate::error::CallError;
use crate::value::{RemoteRef, Value};

/// How often a waiting call re-checks whether the holder has started
/// waiting on the host (releases wake waiters at once).
const RECHECK: Duration = Duration::from_millis(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One live object in the table.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) class: Arc<ClassEntry>,
    /// An `Arc<ObjectCell<T>>` for the class's type.
    cell: Arc<dyn Any + Send + Sync>,
    /// Which connection created it (HTTP clients are told apart by this).
    pub(crate) owner: u64,
}

impl Entry {
    pub(crate) fn remote_ref(&self, library: &str) -> RemoteRef {
        RemoteRef { library: library.to_owned(), class: self.class.name.clone(), id: self.id.to_string() }
    }
}

/// Every live object of a plugin process.
#[derive(Default)]
pub(crate) struct ObjectTable {
    next_id: AtomicU64,
    entries: Mutex<HashMap<u64, Entry>>,
}

impl ObjectTable {
    fn insert<T: Send + Sync + 'static>(&self, class: Arc<ClassEntry>, value: T, owner: u64) -> Entry {
        let on_destroy = class.on_destroy.as_ref().and_then(|h| h.downcast_ref::<fn(&mut T)>()).copied();
        let cell = Arc::new(ObjectCell::new(value, on_destroy));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Entry { id, class, cell, owner };
        lock(&self.entries).insert(id, entry.clone());
        entry
    }

    /// The live object with this id.
    pub(crate) fn get(&self, id: &str) -> Option<Entry> {
        let id = id.parse::<u64>().ok()?;
        lock(&self.entries).get(&id).cloned()
    }

    /// Removes the object; its hooks run when the returned entry (and any
    /// call still using it) is dropped. `None` if it was not live.
    pub(crate) fn remove(&self, id: &str) -> Option<Entry> {
        let id = id.parse::<u64>().ok()?;
        lock(&self.entries).remove(&id)
    }

    /// Removes every object (owned by `owner`, if given).
    pub(crate) fn drain(&self, owner: Option<u64>) -> Vec<Entry> {
        let mut entries = lock(&self.entries);
        let ids: Vec<u64> =
            entries.iter().filter(|(_, e)| owner.is_none_or(|o| e.owner == o)).map(|(id, _)| *id).collect();
        ids.into_iter().filter_map(|id| entries.remove(&id)).collect()
    }

    /// Up to `limit` live ids, in order, for error messages.
    pub(crate) fn some_ids(&self, limit: usize) -> (Vec<u64>, usize) {
        let entries = lock(&self.entries);
        let mut ids: Vec<u64> = entries.keys().copied().collect();
        ids.sort_unstable();
        let total = ids.len();
        ids.truncate(limit);
        (ids, total)
    }

    /// The number of live objects.
    #[cfg(feature = "testing")]
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// Drops removed objects, reporting a panicking `__del__` or `Drop` on
/// stderr instead of letting it take the plugin down.
pub(crate) fn release(entries: Vec<Entry>) {
    for entry in entries {
        let (class, id) = (entry.class.name.clone(), entry.id);
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(entry))) {
            eprintln!("scriptling-plugin: destroying {class} object {id} panicked: {}", crate::panic::message(&*p));
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

/// The lock around one object, with the bookkeeping that lets a waiter tell
/// "busy" from "busy and waiting on the host".
pub(crate) struct ObjectCell<T> {
    rw: Arc<RwLock<Instance<T>>>,
    /// The calls currently holding a guard.
    holders: Mutex<Vec<Arc<CallState>>>,
    released: Condvar,
    released_gen: Mutex<u64>,
    released_async: Notify,
}

impl<T: Send + Sync + 'static> ObjectCell<T> {
    fn new(value: T, on_destroy: Option<fn(&mut T)>) -> Self {
        Self {
            rw: Arc::new(RwLock::new(Instance { value, on_destroy })),
            holders: Mutex::new(Vec::new()),
            released: Condvar::new(),
            released_gen: Mutex::new(0),
            released_async: Notify::new(),
        }
    }

    fn holder_waiting_on_host(&self) -> bool {
        lock(&self.holders).iter().any(|c| c.is_waiting_on_host())
    }

    fn hold(&self) -> Option<Arc<CallState>> {
        let call = context::current().map(|s| s.call);
        if let Some(c) = &call {
            lock(&self.holders).push(Arc::clone(c));
        }
        call
    }

    fn unhold(&self, call: Option<&Arc<CallState>>) {
        if let Some(call) = call {
            let mut holders = lock(&self.holders);
            if let Some(i) = holders.iter().position(|c| Arc::ptr_eq(c, call)) {
                holders.swap_remove(i);
            }
        }
        *lock(&self.released_gen) += 1;
        self.released.notify_all();
        self.released_async.notify_waiters();
    }

    fn wait_blocking(&self) {
        let generation = lock(&self.released_gen);
        let _ = self.released.wait_timeout(generation, RECHECK);
    }

    async fn wait_async(&self) {
        let _ = tokio::time::timeout(RECHECK, self.released_async.notified()).await;
    }
}

/// A handle to a live object of class `T`: a `#[plugin_class]` method's
/// receiver, or a parameter that accepts an instance.
///
/// As a parameter, `Ref<Counter>` accepts a Scriptling `Counter` instance
/// (sent as `{"type":"remote",...}`) and resolves it in the object table; a
/// wrong class or a destroyed object is an argument error. Returned, it
/// becomes the same remote value.
///
/// Access the object with [`read`](Ref::read) / [`write`](Ref::write) from
/// sync code, or [`read_async`](Ref::read_async) /
/// [`write_async`](Ref::write_async) from async code.
///
/// ```
/// use scriptling_plugin::{plugin_class, plugin_fn, Ref};
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
/// fn transfer(from: Ref<Account>, to: Ref<Account>, amount: i64) -> Result<i64, scriptling_plugin::CallError> {
///     from.write()?.balance -= amount;
///     let mut to = to.write()?;
///     to.balance += amount;
///     Ok(to.balance)
/// }
/// ```
pub struct Ref<T> {
    entry: Entry,
    cell: Arc<ObjectCell<T>>,
    library: Arc<str>,
}

impl<T> Clone for Ref<T> {
    fn clone(&self) -> Self {
        Self { entry: self.entry.clone(), cell: Arc::clone(&self.cell), library: Arc::clone(&self.library) }
    }
}

impl<T> fmt::Debug for Ref<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ref<{}>({})", self.entry.class.name, self.entry.id)
    }
}

impl<T: Send + Sync + 'static> Ref<T> {
    pub(crate) fn from_entry(entry: Entry, library: Arc<str>) -> Option<Self> {
        let cell = Arc::clone(&entry.cell).downcast::<ObjectCell<T>>().ok()?;
        Some(Self { entry, cell, library })
    }

    /// The object's id, as the host knows it.
    pub fn id(&self) -> String {
        self.entry.id.to_string()
    }

    /// The remote reference the host uses for this object.
    pub fn remote_ref(&self) -> RemoteRef {
        self.entry.remote_ref(&self.library)
    }

    fn busy(&self) -> CallError {
        CallError::about_call(format!(
            "{} object {} is in use by a call that is waiting on a callback; \
             calling back into the same object from that callback is not supported",
            self.entry.class.name, self.entry.id
        ))
    }

    /// Shared access, blocking until no `&mut` call holds the object. For
    /// sync code (sync handlers run on the SDK's own worker threads).
    pub fn read(&self) -> Result<ReadGuard<T>, CallError> {
        let (guard, holder) = self.acquire_blocking(|rw| rw.try_read_owned().ok())?;
        Ok(ReadGuard { guard, _holder: holder })
    }

    /// Exclusive access, blocking until no other call holds the object.
    pub fn write(&self) -> Result<WriteGuard<T>, CallError> {
        let (guard, holder) = self.acquire_blocking(|rw| rw.try_write_owned().ok())?;
        Ok(WriteGuard { guard, _holder: holder })
    }

    /// Shared access from async code.
    pub async fn read_async(&self) -> Result<ReadGuard<T>, CallError> {
        let (guard, holder) = self.acquire_async(|rw| rw.try_read_owned().ok()).await?;
        Ok(ReadGuard { guard, _holder: holder })
    }

    /// Exclusive access from async code.
    pub async fn write_async(&self) -> Result<WriteGuard<T>, CallError> {
        let (guard, holder) = self.acquire_async(|rw| rw.try_write_owned().ok()).await?;
        Ok(WriteGuard { guard, _holder: holder })
    }

    /// One try: the guard, `Ok(None)` to wait and retry, or the error for an
    /// object held by a call that is waiting on the host.
    fn attempt<G>(
        &self,
        try_lock: &impl Fn(Arc<RwLock<Instance<T>>>) -> Option<G>,
    ) -> Result<Option<(G, Holder<T>)>, CallError> {
        if let Some(guard) = try_lock(Arc::clone(&self.cell.rw)) {
            return Ok(Some((guard, self.hold())));
        }
        if self.cell.holder_waiting_on_host() {
            return Err(self.busy());
        }
        Ok(None)
    }

    fn acquire_blocking<G>(
        &self,
        try_lock: impl Fn(Arc<RwLock<Instance<T>>>) -> Option<G>,
    ) -> Result<(G, Holder<T>), CallError> {
        loop {
            if let Some(acquired) = self.attempt(&try_lock)? {
                return Ok(acquired);
            }
            self.cell.wait_blocking();
        }
    }

    async fn acquire_async<G>(
        &self,
        try_lock: impl Fn(Arc<RwLock<Instance<T>>>) -> Option<G>,
    ) -> Result<(G, Holder<T>), CallError> {
        loop {
            if let Some(acquired) = self.attempt(&try_lock)? {
                return Ok(acquired);
            }
            self.cell.wait_async().await;
        }
    }

    fn hold(&self) -> Holder<T> {
        Holder { call: self.cell.hold(), cell: Arc::clone(&self.cell) }
    }
}

/// Releases a guard's registration and wakes waiters.
struct Holder<T: Send + Sync + 'static> {
    call: Option<Arc<CallState>>,
    cell: Arc<ObjectCell<T>>,
}

impl<T: Send + Sync + 'static> Drop for Holder<T> {
    fn drop(&mut self) {
        self.cell.unhold(self.call.as_ref());
    }
}

/// Shared access to an object (see [`Ref::read`]).
pub struct ReadGuard<T: Send + Sync + 'static> {
    // Field order: the lock is released before waiters are woken.
    guard: OwnedRwLockReadGuard<Instance<T>>,
    _holder: Holder<T>,
}

/// Exclusive access to an object (see [`Ref::write`]).
pub struct WriteGuard<T: Send + Sync + 'static> {
    guard: OwnedRwLockWriteGuard<Instance<T>>,
    _holder: Holder<T>,
}

impl<T: Send + Sync + 'static> Deref for ReadGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

impl<T: Send + Sync + 'static> Deref for WriteGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

impl<T: Send + Sync + 'static> DerefMut for WriteGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard.value
    }
}

impl<T: PluginClass> FromValue for Ref<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        let Value::Remote(remote) = value else {
            return Err(FromValueError::mismatch(&Self::expected(), &value));
        };
        let Some(scope) = context::current() else {
            return Err(FromValueError::message("can only be resolved while the plugin is serving a call"));
        };
        let core = &scope.conn.core;
        let Some(entry) = core.objects.get(&remote.id) else {
            return Err(FromValueError::message(format!(
                "must be a live {} object, but object {} does not exist or has been destroyed",
                T::NAME,
                remote.id
            )));
        };
        if entry.class.type_id != TypeId::of::<T>() {
            return Err(FromValueError::message(format!(
                "must be a {} object, got a {} object",
                T::NAME,
                entry.class.name
            )));
        }
        Ref::from_entry(entry, Arc::clone(&core.library)).ok_or_else(|| FromValueError::message("has the wrong type"))
    }

    fn expected() -> std::borrow::Cow<'static, str> {
        format!("a {} object", T::NAME).into()
    }
}

impl<T> IntoValue for Ref<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Remote(self.entry.remote_ref(&self.library)))
    }
}

/// Inserts a new instance of `T` into the current call's object table and
/// returns its remote value. This is what a `#[plugin_class]` type's
/// `IntoValue` does; hand-written classes call it from theirs.
pub fn into_remote<T: PluginClass>(value: T) -> Result<Value, IntoValueError> {
    let Some(scope) = context::current() else {
        return Err(IntoValueError::new(format!(
            "a {} instance can only be returned while the plugin is serving a call",
            T::NAME
        )));
    };
    let core = &scope.conn.core;
    let Some(class) = core.class_for(TypeId::of::<T>()) else {
        return Err(IntoValueError::new(format!(
            "class {} is not registered with this plugin: add `.class::<{}>()`",
            T::NAME,
            std::any::type_name::<T>().rsplit("::").next().unwrap_or(T::NAME)
        )));
    };
    let entry = core.objects.insert(class, value, scope.client);
    Ok(Value::Remote(entry.remote_ref(&core.library)))
}
