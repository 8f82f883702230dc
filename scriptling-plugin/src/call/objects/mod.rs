//! Remote objects: live instances of plugin classes, the table that names
//! them, the lock that rules calls on each, and the handle handlers get.
//!
//! - Calls on different objects run concurrently. On one object, `&self`
//!   calls share it and `&mut self` calls get it alone, in arrival order
//!   (`lock.rs`).
//! - Destroying an object removes it from the table at once; its `__del__`
//!   hook and `Drop` run when the last call using it has finished, exactly
//!   once.

mod handle;
mod lock;
mod table;

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

pub use handle::{Object, ObjectReadGuard, ObjectWriteGuard, into_object};
#[cfg_attr(not(feature = "http"), allow(unused_imports))]
pub(crate) use table::{Limit, ObjectTable};

use crate::call::context::HostWaitListener;
use crate::call::objects::lock::ObjectLock;
use crate::support::{lock, panic_message};
use crate::value::ObjectRef;

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

    fn owner(&self) -> Option<&str> {
        self.0.owner.as_deref()
    }

    pub(crate) fn object_ref(&self, library: &str) -> ObjectRef {
        ObjectRef { library: library.to_owned(), class: self.0.class.name.clone(), id: self.0.id.to_string() }
    }

    /// `Counter object 3`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} object {}", self.0.class.name, self.0.id)
    }
}

/// Drops removed objects one by one, noting in `now` the one being dropped
/// (so a hook that overruns a deadline can be named), and reporting a
/// panicking `__del__` or `Drop` on stderr instead of letting it take the
/// plugin down. Run it inside a call scope and the hooks' log records reach
/// the host.
pub(crate) fn release(entries: Vec<Entry>, now: &Mutex<Option<String>>) {
    for entry in entries {
        let what = entry.describe();
        *lock(now) = Some(what.clone());
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(entry))) {
            eprintln!("scriptling-plugin: destroying {what} panicked: {}", panic_message(&*p));
        }
    }
    *lock(now) = None;
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

/// An object's value and the lock that rules access to it.
pub(crate) struct ObjectCell<T> {
    lock: ObjectLock,
    value: UnsafeCell<Instance<T>>,
}

// SAFETY: `value` is reached only through the guards of `handle.rs`, which
// exist only while `lock` has granted them: shared guards (`&T` on several
// threads, hence `T: Sync`) or one exclusive guard (`&mut T` on any thread,
// hence `T: Send`).
unsafe impl<T: Send + Sync> Sync for ObjectCell<T> {}

impl<T> ObjectCell<T> {
    fn new(value: T, on_destroy: Option<fn(&mut T)>) -> Self {
        Self { lock: ObjectLock::default(), value: UnsafeCell::new(Instance { value, on_destroy }) }
    }
}

impl<T: Send + Sync + 'static> HostWaitListener for ObjectCell<T> {
    fn holder_changed(&self) {
        self.lock.holder_changed();
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    struct Thing(i64);

    impl PluginClass for Thing {
        const NAME: &'static str = "Thing";
    }

    #[test]
    fn hooks_run_once_when_the_last_user_lets_go_and_a_panicking_one_is_reported() {
        static DESTROYED: AtomicU64 = AtomicU64::new(0);
        fn hook(t: &mut Thing) {
            DESTROYED.fetch_add(t.0 as u64, Ordering::SeqCst);
            assert_ne!(t.0, 7, "seven panics");
        }
        let hook: fn(&mut Thing) = hook;
        let class = Arc::new(ClassInfo {
            name: "Thing".into(),
            type_id: TypeId::of::<Thing>(),
            on_destroy: Some(Box::new(hook)),
            index: 0,
        });
        let table = ObjectTable::sequential();
        let entry = table.insert(Arc::clone(&class), Thing(3), None).unwrap();
        let obj: Object<Thing> = Object::from_entry(entry, "lib".into()).unwrap();
        let guard = obj.read().unwrap();
        let now = Mutex::new(None);
        release(table.drain(), &now);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 0, "still in use");
        drop(guard);
        drop(obj);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 3);
        table.insert(class, Thing(7), None).unwrap();
        release(table.drain(), &now);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 10, "the panicking hook ran, and was caught");
        assert_eq!(*lock(&now), None);
    }
}
