//! Every option spelling the attributes accept: flags bare or `= true` /
//! `= false`, keywords from `#[arg(name)]`, destructured parameters.

use scriptling_plugin::{Json, Plugin, plugin_class, plugin_fn};

#[plugin_fn(hidden = true)]
fn secret() -> i64 {
    1
}

#[plugin_fn(hidden = false, name = "shown")]
fn not_hidden() -> i64 {
    2
}

#[plugin_fn]
fn limit(#[arg(name = "options", default = Json(serde_json::json!({"limit": 1})))] Json(o): Json<serde_json::Value>) -> i64 {
    o["limit"].as_i64().unwrap_or(0)
}

#[plugin_fn]
fn renamed(#[arg(name = "type")] kind: String, #[arg(default = 2)] mut times: u32) -> String {
    times += 0;
    kind.repeat(times as usize)
}

#[plugin_class(name = "Tally")]
struct Counter {
    value: i64,
}

#[plugin_class]
impl Counter {
    #[constructor]
    fn new(#[arg(default = 0)] start: i64) -> Self {
        Counter { value: start }
    }

    #[property(settable = true)]
    fn value(&self) -> i64 {
        self.value
    }

    fn set_value(&mut self, value: i64) {
        self.value = value;
    }

    #[property(settable = false, name = "double")]
    fn twice(&self) -> i64 {
        self.value * 2
    }
}

fn main() {
    let plugin = Plugin::new("demo", "1.0.0", "")
        .function::<secret>()
        .function::<not_hidden>()
        .function::<limit>()
        .function::<renamed>()
        .class::<Counter>();
    let _ = plugin;
}
