//! [`CallParams`]: the params of every call method, and how they are decoded.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::value::Value;

/// The params of every call method (`function.call`, `object.new`,
/// `object.call_method`, `object.destroy`): each requires its own names,
/// and ignores the others and any unknown field. (A field holding values
/// must be searched by its `HoldsStrings` too, or a large string taken over
/// from its line would reach the handler as the empty marker.)
#[derive(Deserialize, Debug, Default, PartialEq)]
pub(crate) struct CallParams {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) class: Option<String>,
    #[serde(default)]
    pub(crate) object_id: Option<String>,
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) args: Option<Vec<Value>>,
    #[serde(default)]
    pub(crate) kwargs: Option<BTreeMap<String, Value>>,
}

impl crate::value::taken::HoldsStrings for CallParams {
    fn marker(&mut self, marker: usize) -> Option<&mut String> {
        let args = self.args.iter_mut().flatten();
        let kwargs = self.kwargs.iter_mut().flat_map(|kwargs| kwargs.values_mut());
        args.chain(kwargs).find_map(|value| value.marker(marker))
    }
}

impl CallParams {
    /// Takes the positional and keyword arguments (absent ones are empty).
    pub(crate) fn arguments(&mut self) -> (Vec<Value>, BTreeMap<String, Value>) {
        (self.args.take().unwrap_or_default(), self.kwargs.take().unwrap_or_default())
    }
}
