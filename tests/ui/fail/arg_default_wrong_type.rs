use scriptling_plugin::{Plugin, plugin_fn};

#[plugin_fn]
fn repeat(text: String, #[arg(default = "twice")] times: u32) -> String {
    text.repeat(times as usize)
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<repeat>();
}
