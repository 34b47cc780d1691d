//! Bounded resources for any input: a spec whose run would take all of the machine's memory
//! or could never finish is refused before anything large is built and before the simulation
//! starts, with one message that names the key and the reason.

use crate::testing::{tiny_dir, TINY};
use pfcsim_core::run::build_simulation;
use pfcsim_core::spec::{Scenario, Spec};

/// The message the spec `text` is refused with, at reading, preparation or setup (it must be
/// refused); relative paths resolve from the tiny spec's folder.
fn refusal(text: &str) -> String {
    let built = Spec::from_toml(text, "s.toml")
        .and_then(|spec| Scenario::prepare(spec, &tiny_dir()))
        .and_then(build_simulation);
    match built {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.message,
    }
}

/// An array where a table belongs was read field by field, so `switch = []` stood for the
/// default `[switch]`.
#[test]
fn an_array_where_a_table_belongs_is_refused() {
    for key in ["switch", "nic", "run", "transport", "coflow"] {
        assert_eq!(
            refusal(&format!("{key} = []\n{TINY}")),
            format!("s.toml (line 1): {key}: invalid type: sequence, expected a table")
        );
    }
    let e = refusal(&TINY.replace(
        "host_link = { rate = \"100Gbps\", delay = \"1us\" }",
        "host_link = [\"100Gbps\", \"1us\"]",
    ));
    assert_eq!(
        e,
        "s.toml (line 8): topology.host_link: invalid type: sequence, expected a table"
    );
}
