//! Every supported class shape compiles and registers.

use scriptling_plugin::{CallError, Plugin, Object, plugin_class, plugin_fn};

/// A class with every kind of member.
#[plugin_class(name = "Store")]
pub struct KeyValueStore {
    entries: Vec<(String, String)>,
    closed: bool,
}

#[plugin_class]
impl KeyValueStore {
    /// Opens a store.
    #[constructor]
    fn open(#[arg(default = 0)] capacity: usize) -> Result<Self, String> {
        Ok(KeyValueStore { entries: Vec::with_capacity(capacity), closed: false })
    }

    fn put(&mut self, key: String, value: String) {
        self.entries.push((key, value));
    }

    fn get(&self, key: String) -> Option<String> {
        self.entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
    }

    async fn count_later(&self) -> usize {
        self.entries.len()
    }

    async fn clear_later(&mut self) -> Result<(), CallError> {
        self.entries.clear();
        Ok(())
    }

    #[plugin_fn(name = "len")]
    fn size(&self) -> usize {
        self.entries.len()
    }

    #[property]
    fn closed(&self) -> bool {
        self.closed
    }

    #[property(settable, name = "label")]
    fn title(&self) -> String {
        String::new()
    }

    fn set_title(&mut self, title: String) {
        let _ = title;
    }

    fn fork(&self) -> KeyValueStore {
        KeyValueStore { entries: self.entries.clone(), closed: false }
    }

    #[del]
    fn close(&mut self) {
        self.closed = true;
    }
}

// Helpers live in a plain impl block.
impl KeyValueStore {
    fn helper(&self) -> usize {
        self.entries.len()
    }
}

#[plugin_class]
struct Async;

#[plugin_class]
impl Async {
    #[constructor]
    async fn create() -> Self {
        Async
    }
}

#[plugin_fn]
fn merge(a: Object<KeyValueStore>, b: Option<Object<KeyValueStore>>) -> Result<usize, CallError> {
    let n = a.read()?.helper();
    Ok(n + b.map(|b| b.read().map(|s| s.helper())).transpose()?.unwrap_or(0))
}

#[plugin_fn]
fn new_store() -> KeyValueStore {
    KeyValueStore { entries: Vec::new(), closed: false }
}

fn main() {
    let _ = Plugin::new("p", "1", "").class::<KeyValueStore>().class::<Async>().function::<merge>().function::<new_store>();
}
