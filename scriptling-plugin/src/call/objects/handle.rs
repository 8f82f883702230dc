//! [`Object<T>`]: a handler's handle to a live object, its read and write
//! guards, and how objects travel as values.

use std::any::TypeId;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::call::context::{self, CallScope, CallState, HostWaitListener};
use crate::call::error::CallError;
use crate::call::objects::lock::{Mode, Refusal};
use crate::call::objects::{Entry, ObjectCell, PluginClass};
use crate::value::convert::{FromValue, FromValueError, IntoValue, IntoValueError};
use crate::value::{ObjectRef, Value};

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
/// [`write_async`](Object::write_async) from async code. Calls share an
/// object for reading and take it alone for writing, in the order they
/// asked. A call that asks again for an object it holds, in a way that
/// conflicts (a `&mut self` method reading its own object through another
/// handle, say), gets an error at once rather than waiting on itself.
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
        write!(f, "Object<{}>({})", self.entry.class().name, self.entry.id())
    }
}

impl<T: PluginClass> Object<T> {
    pub(crate) fn from_entry(entry: Entry, library: Arc<str>) -> Option<Self> {
        let cell = Arc::clone(&entry.0.cell).downcast::<ObjectCell<T>>().ok()?;
        Some(Self { entry, cell, library })
    }

    /// The object's id, as the host knows it.
    pub fn id(&self) -> &str {
        self.entry.id()
    }

    /// The [`ObjectRef`] the host uses for this object.
    pub fn object_ref(&self) -> ObjectRef {
        self.entry.object_ref(&self.library)
    }

    /// Shared access, blocking while a `&mut` call holds the object or waits
    /// for it ahead of this one. For sync code (sync handlers run on the
    /// SDK's own worker threads); it fails in an async handler, where it
    /// could stall the async runtime (use [`read_async`](Object::read_async)).
    pub fn read(&self) -> Result<ObjectReadGuard<T>, CallError> {
        let holder = self.acquire_blocking(Mode::Shared)?;
        Ok(ObjectReadGuard { holder })
    }

    /// Exclusive access, blocking while other calls hold the object or wait
    /// for it ahead of this one. For sync code, as [`read`](Object::read)
    /// (use [`write_async`](Object::write_async) in async handlers).
    pub fn write(&self) -> Result<ObjectWriteGuard<T>, CallError> {
        let holder = self.acquire_blocking(Mode::Exclusive)?;
        Ok(ObjectWriteGuard { holder })
    }

    /// Shared access from async code.
    pub async fn read_async(&self) -> Result<ObjectReadGuard<T>, CallError> {
        let holder = self.acquire_async(Mode::Shared).await?;
        Ok(ObjectReadGuard { holder })
    }

    /// Exclusive access from async code.
    pub async fn write_async(&self) -> Result<ObjectWriteGuard<T>, CallError> {
        let holder = self.acquire_async(Mode::Exclusive).await?;
        Ok(ObjectWriteGuard { holder })
    }

    fn acquire_blocking(&self, mode: Mode) -> Result<Holder<T>, CallError> {
        // Async handlers share the runtime's thread (by default its only
        // one): blocking it while the holder waits to be polled again
        // there would wait for ever.
        if context::in_async() {
            let (blocking, async_form) = match mode {
                Mode::Shared => ("read()", "read_async().await"),
                Mode::Exclusive => ("write()", "write_async().await"),
            };
            return Err(CallError::about_call(format!(
                "{}: use `{async_form}` in async code; `{blocking}` blocks, and would stall the async runtime",
                self.entry.describe()
            )));
        }
        let (call, bound) = current_call();
        match self.cell.lock.acquire_blocking(mode, call.as_ref(), bound) {
            Ok(()) => Ok(self.holder(mode, call)),
            Err(refusal) => Err(self.refused(refusal)),
        }
    }

    async fn acquire_async(&self, mode: Mode) -> Result<Holder<T>, CallError> {
        let (call, bound) = current_call();
        match self.cell.lock.acquire(mode, call.as_ref(), bound).await {
            Ok(()) => Ok(self.holder(mode, call)),
            Err(refusal) => Err(self.refused(refusal)),
        }
    }

    fn holder(&self, mode: Mode, call: Option<Arc<CallState>>) -> Holder<T> {
        let listener: Arc<dyn HostWaitListener> = self.cell.clone();
        if let Some(call) = &call {
            call.listen(Arc::clone(&listener));
        }
        Holder { mode, call, cell: Arc::clone(&self.cell), listener }
    }

    fn refused(&self, refusal: Refusal) -> CallError {
        let object = self.entry.describe();
        CallError::about_call(match refusal {
            Refusal::Reentrant { held: Mode::Exclusive, wanted: Mode::Shared } => format!(
                "{object} is already mutably borrowed by this call, so it cannot be read until that borrow ends"
            ),
            Refusal::Reentrant { held: Mode::Exclusive, wanted: Mode::Exclusive } => {
                format!("{object} is already mutably borrowed by this call, so it cannot be borrowed mutably again")
            }
            Refusal::Reentrant { held: Mode::Shared, .. } => format!(
                "{object} is already borrowed by this call, so it cannot be borrowed mutably until that borrow ends"
            ),
            Refusal::HolderWaitsOnHost { waited } => format!(
                "{object} is held by a call that has been waiting on a callback for {waited:?}, the most a call \
                 waits for it (Plugin::busy_object_timeout): either this call came from that callback (a \
                 callback cannot use the object its caller holds: make both methods take &self, or call \
                 back before taking the object), or the callback runs longer than that"
            ),
        })
    }
}

/// The call running on this thread, and how long it waits for an object
/// held by a call waiting on the host (its session's bound; the default
/// outside a call).
fn current_call() -> (Option<Arc<CallState>>, std::time::Duration) {
    context::with_current(|scope| match scope {
        Some(scope) => (Some(Arc::clone(&scope.call)), scope.link.waits.busy_object),
        None => (None, crate::call::link::Waits::default().busy_object),
    })
}

/// A borrow granted: gives it back when dropped.
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
        self.cell.lock.release(self.mode, self.call.as_ref());
    }
}

/// Shared access to an object (see [`Object::read`]).
pub struct ObjectReadGuard<T> {
    holder: Holder<T>,
}

/// Exclusive access to an object (see [`Object::write`]).
pub struct ObjectWriteGuard<T> {
    holder: Holder<T>,
}

impl<T> Deref for ObjectReadGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock granted a shared borrow, held until this guard
        // drops; only shared references exist meanwhile.
        unsafe { &(*self.holder.cell.value.get()).value }
    }
}

impl<T> Deref for ObjectWriteGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock granted an exclusive borrow, held until this
        // guard drops; no other reference exists meanwhile.
        unsafe { &(*self.holder.cell.value.get()).value }
    }
}

impl<T> DerefMut for ObjectWriteGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut (*self.holder.cell.value.get()).value }
    }
}

impl<T: PluginClass> FromValue for Object<T> {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        let Value::Object(remote) = value else {
            return Err(FromValueError::mismatch(&Self::expected(), &value));
        };
        let Some(scope) = context::current() else {
            return Err(FromValueError::new("can only be resolved while the plugin is serving a call"));
        };
        let link = &scope.link;
        let Some(entry) = link.objects.get(&remote.id, scope.owner.as_deref()) else {
            return Err(FromValueError::new(format!(
                "must be a live {} object, but object {} does not exist or has been destroyed",
                T::NAME,
                remote.id
            )));
        };
        if entry.class().type_id != TypeId::of::<T>() {
            return Err(FromValueError::new(format!(
                "must be a {} object, got a {} object",
                T::NAME,
                entry.class().name
            )));
        }
        Object::from_entry(entry, Arc::clone(&link.library)).ok_or_else(|| FromValueError::new("has the wrong type"))
    }

    fn expected() -> std::borrow::Cow<'static, str> {
        format!("a {} object", T::NAME).into()
    }
}

impl<T> IntoValue for Object<T> {
    fn into_value(self) -> Result<Value, IntoValueError> {
        Ok(Value::Object(self.entry.object_ref(&self.library)))
    }
}

/// Inserts a new instance of `T` into the current call's object table and
/// returns it as a [`Value::Object`]. This is what a `#[plugin_class]` type's
/// `IntoValue` does; hand-written classes call it from theirs.
///
/// ```
/// use scriptling_plugin::{into_object, IntoValue, IntoValueError, PluginClass, Value};
///
/// struct Token(String);
///
/// impl PluginClass for Token {
///     const NAME: &'static str = "Token";
/// }
///
/// impl IntoValue for Token {
///     fn into_value(self) -> Result<Value, IntoValueError> {
///         into_object(self)
///     }
/// }
///
/// // Outside a call there is no table to put it in:
/// let err = Token("x".into()).into_value().unwrap_err();
/// assert_eq!(err.to_string(), "a Token instance can only be returned while the plugin is serving a call");
/// ```
pub fn into_object<T: PluginClass>(value: T) -> Result<Value, IntoValueError> {
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
    let entry = link.objects.insert(Arc::clone(class), value, owner).map_err(IntoValueError::refusal)?;
    Ok(Value::Object(entry.object_ref(&link.library)))
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use crate::call::context::{CallScope, enter};
    use crate::call::link::Link;
    use crate::call::objects::{ClassInfo, ObjectTable};
    use std::sync::mpsc;
    use std::time::Duration;

    struct Thing(i64);

    impl PluginClass for Thing {
        const NAME: &'static str = "Thing";
    }

    fn object(table: &ObjectTable) -> Object<Thing> {
        let class =
            Arc::new(ClassInfo { name: "Thing".into(), type_id: TypeId::of::<Thing>(), on_destroy: None, index: 0 });
        Object::from_entry(table.insert(class, Thing(1), None).unwrap(), "lib".into()).unwrap()
    }

    fn in_call(name: &str) -> (Arc<CallState>, crate::call::context::Entered) {
        let call = CallState::new(name.into());
        let scope = CallScope {
            link: Arc::new(Link::detached()),
            call: Arc::clone(&call),
            owner: None,
            pool: None,
            in_async: false,
        };
        (call, enter(scope))
    }

    #[test]
    fn readers_share_and_writers_wait_without_polling() {
        let table = ObjectTable::sequential();
        let obj = object(&table);
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
        rx.recv_timeout(Duration::from_secs(5)).expect("woken by the release");
        writer.join().unwrap();
        assert_eq!(obj.read().unwrap().0, 5);
    }

    #[test]
    fn a_call_reaching_its_own_object_is_told_which_borrow_is_in_the_way() {
        let table = ObjectTable::sequential();
        let obj = object(&table);
        let (_call, _entered) = in_call("Thing.merge");
        let mut mine = obj.write().unwrap();
        mine.0 = 2;
        let err = obj.read().err().unwrap();
        assert_eq!(
            err.into_message(&"Thing.merge".into()),
            "Thing.merge(): Thing object 1 is already mutably borrowed by this call, so it cannot be read until that \
             borrow ends"
        );
        drop(mine);
        let shared = obj.read().unwrap();
        assert_eq!(obj.read().unwrap().0 + shared.0, 4, "shared twice is fine");
        let err = obj.write().err().unwrap();
        assert!(err.message().contains("is already borrowed by this call"), "{err}");
    }

    #[tokio::test]
    async fn async_waiters_are_woken_by_releases() {
        let table = ObjectTable::sequential();
        let obj = object(&table);
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
}
