//! Unresolved template parameters (`{{ gpus_per_worker * 4 }}`, Dynamo's fabric profiles, Go or
//! Jinja templates) where a recipe holds a device count, a size or a transport setting: such a
//! value is not a quantity, and reading it as one would hide what the pod really gets. They are
//! refused with the step to run (render the template), never accepted. Elsewhere (a chat template
//! in a ConfigMap) `{{` is ordinary text.

use crate::load::Document;
use crate::yaml::{Kind, Node};

/// Keys under which a value is a quantity or a transport setting.
const QUANTITY_KEYS: &[&str] = &[
    "device",
    "resources",
    "sharedMemory",
    "sharedMemorySize",
    "multinode",
    "parallelism",
    "leaderWorkerTemplate",
    "env",
    "envs",
];

/// An unresolved parameter: where it is and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved {
    pub location: String,
    pub path: String,
    pub text: String,
}

fn is_template(s: &str) -> bool {
    s.find("{{").is_some_and(|i| s[i..].contains("}}"))
}

/// The first unresolved template parameter of `doc` in a quantity or transport position.
pub(crate) fn find(doc: &Document) -> Option<Unresolved> {
    let mut stack: Vec<(&Node, Vec<&str>)> = vec![(&doc.root, Vec::new())];
    while let Some((n, path)) = stack.pop() {
        match &n.kind {
            Kind::Map(entries) => {
                for (k, v) in entries.iter().rev() {
                    let mut p = path.clone();
                    p.push(k.as_str());
                    stack.push((v, p));
                }
            }
            Kind::Seq(items) => stack.extend(items.iter().rev().map(|i| (i, path.clone()))),
            Kind::Scalar(s) if is_template(s) && path.iter().any(|k| QUANTITY_KEYS.contains(k)) => {
                return Some(Unresolved {
                    location: format!("{}:{}", doc.source, n.line),
                    path: path.join("."),
                    text: s.trim().chars().take(80).collect(),
                });
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        crate::load::parse_bytes("p.yaml", text.as_bytes()).unwrap().remove(0)
    }

    #[test]
    fn a_parameter_in_a_device_count_is_found_text_elsewhere_is_not() {
        let d = doc("provider: aws\ndevice:\n  vpc.amazonaws.com/efa: \"{{ gpus_per_worker * 4 }}\"\n");
        let u = find(&d).unwrap();
        assert_eq!(u.path, "device.vpc.amazonaws.com/efa");
        assert_eq!(u.location, "p.yaml:3");
        assert!(u.text.contains("gpus_per_worker"));
        let chat = doc("kind: ConfigMap\ndata:\n  template: \"{{ messages }}\"\n");
        assert_eq!(find(&chat), None);
    }
}
