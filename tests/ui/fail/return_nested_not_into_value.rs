use scriptling_plugin::{CallError, Plugin, plugin_fn};

/// A search hit, without `IntoValue`: the error names `Hit`, not the `Result`.
struct Hit {
    line: i64,
}

#[plugin_fn]
fn search() -> Result<Vec<Hit>, CallError> {
    Ok(vec![Hit { line: 1 }])
}

fn main() {
    let _ = search().map(|hits| hits[0].line);
    let _ = Plugin::new("demo", "1.0.0", "").function::<search>();
}
