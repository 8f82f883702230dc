//! `rename_all` rules: a Rust name (a `snake_case` field or a `PascalCase`
//! variant) rewritten in another case.

/// A `rename_all` rule: how the words of a name are joined, and how its
/// first and its other words are written.
#[derive(Clone, Copy)]
pub(crate) struct Rule {
    separator: &'static str,
    first: fn(&str) -> String,
    rest: fn(&str) -> String,
}

/// Every rule, under the name the attribute gives it.
const RULES: &[(&str, Rule)] = &[
    ("lowercase", Rule { separator: "", first: lower, rest: lower }),
    ("UPPERCASE", Rule { separator: "", first: upper, rest: upper }),
    ("PascalCase", Rule { separator: "", first: capitalized, rest: capitalized }),
    ("camelCase", Rule { separator: "", first: lower, rest: capitalized }),
    ("snake_case", Rule { separator: "_", first: lower, rest: lower }),
    ("SCREAMING_SNAKE_CASE", Rule { separator: "_", first: upper, rest: upper }),
    ("kebab-case", Rule { separator: "-", first: lower, rest: lower }),
    ("SCREAMING-KEBAB-CASE", Rule { separator: "-", first: upper, rest: upper }),
];

impl Rule {
    /// The rule called `name` in the attribute.
    pub(crate) fn named(name: &str) -> Option<Rule> {
        RULES.iter().find(|(n, _)| *n == name).map(|(_, rule)| *rule)
    }

    /// Every rule's name, for the error that lists them.
    pub(crate) fn names() -> Vec<&'static str> {
        RULES.iter().map(|(name, _)| *name).collect()
    }

    /// `name` (a `snake_case` field or a `PascalCase` variant) under this rule.
    pub(crate) fn apply(self, name: &str) -> String {
        let words = words(name);
        let written = words.iter().enumerate().map(|(i, w)| if i == 0 { (self.first)(w) } else { (self.rest)(w) });
        written.collect::<Vec<_>>().join(self.separator)
    }
}

/// The words of a `snake_case` or `PascalCase` name: `max_len` and `MaxLen`
/// are both `max`, `len`; a run of capitals stays one word (`HTTPServer` is
/// `http`, `server`).
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let starts_word = c.is_uppercase()
            && !current.is_empty()
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_ascii_digit()
                || chars.get(i + 1).is_some_and(|n| n.is_lowercase()));
        if starts_word {
            words.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words.into_iter().map(|w| w.to_lowercase()).collect()
}

/// Words are lowercase already.
fn lower(word: &str) -> String {
    word.to_owned()
}

fn upper(word: &str) -> String {
    word.to_uppercase()
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_variants_take_every_rule() {
        let cases = [
            ("lowercase", "maxlen", "maxlen"),
            ("UPPERCASE", "MAXLEN", "MAXLEN"),
            ("PascalCase", "MaxLen", "MaxLen"),
            ("camelCase", "maxLen", "maxLen"),
            ("snake_case", "max_len", "max_len"),
            ("SCREAMING_SNAKE_CASE", "MAX_LEN", "MAX_LEN"),
            ("kebab-case", "max-len", "max-len"),
            ("SCREAMING-KEBAB-CASE", "MAX-LEN", "MAX-LEN"),
        ];
        for (rule, from_field, from_variant) in cases {
            let rule = Rule::named(rule).unwrap_or_else(|| panic!("{rule} is a rule"));
            assert_eq!(rule.apply("max_len"), from_field, "on a field");
            assert_eq!(rule.apply("MaxLen"), from_variant, "on a variant");
        }
        assert_eq!(Rule::named("snake_case").unwrap().apply("HTTPServer"), "http_server");
        assert_eq!(Rule::named("kebab-case").unwrap().apply("Utf8Text"), "utf8-text");
        assert_eq!(Rule::names().len(), 8);
        assert!(Rule::named("Title Case").is_none());
    }
}
