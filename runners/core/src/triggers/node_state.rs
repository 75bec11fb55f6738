//! The state of a trigger's nodes in one window ([`Nodes`]): held inline when the
//! trigger is one node (the default trigger, `AfterWatermark`), as most are, so that a
//! window's state takes no allocation of its own.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::{Deref, DerefMut};
use tidewater::Timestamp;

/// The state of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct NodeState {
    /// Beam's finished bit.
    pub(super) finished: bool,
    /// `AfterCount`: elements seen in the current pane.
    pub(super) count: u64,
    /// `AfterProcessingTime`: when to fire, fixed by the first element of the pane.
    pub(super) delayed_until: Option<Timestamp>,
}

/// The states of a compiled trigger's nodes, in pre-order: a slice, one node kept
/// inline. Written as the sequence of a `Vec` would be (a snapshot's bytes do not
/// depend on how it is held).
#[derive(Clone, Debug)]
pub(super) enum Nodes {
    One(NodeState),
    Many(Vec<NodeState>),
}

impl Nodes {
    /// The states of `n` nodes that have seen nothing.
    pub(super) fn new(n: usize) -> Self {
        if n == 1 {
            Nodes::One(NodeState::default())
        } else {
            Nodes::Many(vec![NodeState::default(); n])
        }
    }
}

impl From<Vec<NodeState>> for Nodes {
    fn from(mut v: Vec<NodeState>) -> Self {
        match v.pop() {
            Some(one) if v.is_empty() => Nodes::One(one),
            Some(last) => {
                v.push(last);
                Nodes::Many(v)
            }
            None => Nodes::Many(v),
        }
    }
}

impl Deref for Nodes {
    type Target = [NodeState];
    fn deref(&self) -> &[NodeState] {
        match self {
            Nodes::One(n) => std::slice::from_ref(n),
            Nodes::Many(v) => v,
        }
    }
}

impl DerefMut for Nodes {
    fn deref_mut(&mut self) -> &mut [NodeState] {
        match self {
            Nodes::One(n) => std::slice::from_mut(n),
            Nodes::Many(v) => v,
        }
    }
}

impl PartialEq for Nodes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Nodes {}

impl Serialize for Nodes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Nodes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<NodeState>::deserialize(d).map(Nodes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeState, Nodes};

    fn node(count: u64) -> NodeState {
        NodeState {
            finished: count.is_multiple_of(2),
            count,
            delayed_until: Some(tidewater::Timestamp(count as i64 * 7)),
        }
    }

    #[test]
    fn nodes_are_written_as_a_vec_is_and_read_back_alike() {
        for n in 0..4u64 {
            let v: Vec<NodeState> = (0..n).map(node).collect();
            let held = Nodes::from(v.clone());
            assert_eq!(matches!(held, Nodes::One(_)), n == 1);
            let bytes = postcard::to_allocvec(&held).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&v).unwrap());
            let back: Nodes = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(*back, *v);
            assert_eq!(back, held);
        }
        assert_eq!(Nodes::new(1), Nodes::Many(vec![NodeState::default()]));
        assert_eq!(Nodes::new(3).len(), 3);
        assert!(
            std::mem::size_of::<Nodes>() <= 32,
            "one node inline, no bigger than it"
        );
    }
}
