use scriptling_plugin::{Json, Plugin, plugin_fn};

#[plugin_fn]
fn limit(Json(options): Json<serde_json::Value>) -> i64 {
    options["limit"].as_i64().unwrap_or(0)
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<limit>();
}
