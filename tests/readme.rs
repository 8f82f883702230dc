//! The README's reference tables, checked against the code they describe.

const README: &str = include_str!("../README.md");
const MACROS: &str = include_str!("../scriptling-plugin-macros/src/lib.rs");

/// The rows of the README's attributes table.
fn attribute_rows() -> Vec<&'static str> {
    let start = README.find("| attribute | on | does |").expect("the attributes table");
    README[start..].lines().take_while(|line| line.starts_with('|')).collect()
}

/// Every attribute a user can write has a row: the macros crate's
/// attributes, and the ones they read inside the items they mark.
#[test]
fn the_attributes_table_lists_every_attribute() {
    let mut attributes: Vec<&str> =
        MACROS.split("#[proc_macro_attribute]\npub fn ").skip(1).map(|rest| &rest[..rest.find('(').unwrap()]).collect();
    assert!(attributes.contains(&"plugin_fn"), "found {attributes:?}");
    // Read by those attributes on parameters, methods and consts.
    attributes.extend(["arg", "constructor", "property", "del", "constant"]);
    let rows = attribute_rows();
    for attribute in attributes {
        let written = format!("`#[{attribute}");
        assert!(rows.iter().any(|row| row.starts_with(&format!("| {written}"))), "no row for {written}]`");
    }
}
