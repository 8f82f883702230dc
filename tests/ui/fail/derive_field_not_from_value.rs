use scriptling_plugin::{FromValue, Plugin, plugin_fn};

struct Opaque;

#[derive(FromValue)]
struct Options {
    max_hits: i64,
    extra: Opaque,
}

#[plugin_fn]
fn hits(options: Options) -> i64 {
    let _ = options.extra;
    options.max_hits
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<hits>();
}
