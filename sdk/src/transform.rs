//! PTransform: a step of a pipeline, primitive or composite.

use crate::{Element, PCollection, Pipeline};

/// A transform from `I` to [`PTransform::Output`]. Composite transforms apply other
/// transforms in `expand`; their names nest ("WordCount/Split").
///
/// ```
/// use tidewater::{PCollection, PTransform};
///
/// fn split(line: String) -> Vec<String> {
///     line.split_whitespace().map(str::to_string).collect()
/// }
///
/// struct Words;
/// impl PTransform<PCollection<String>> for Words {
///     type Output = PCollection<String>;
///     fn expand(self, lines: PCollection<String>) -> PCollection<String> {
///         lines.flat_map("Split", split)
///     }
/// }
///
/// let p = tidewater::Pipeline::new(Default::default());
/// let words = p.create("Lines", vec!["a b".to_string()]).apply("Words", Words);
/// assert_eq!(words.name(), "Words/Split.main");
/// ```
pub trait PTransform<I: PInput> {
    /// What the transform produces.
    type Output: POutput;
    /// Builds the transform's part of the graph.
    fn expand(self, input: I) -> Self::Output;
}

/// Something a transform can be applied to.
pub trait PInput: Clone {
    /// The pipeline it belongs to.
    fn pipeline(&self) -> &Pipeline;
    /// The PCollections it consists of, by local name.
    fn pcollections(&self) -> Vec<(String, usize)>;
}

/// Something a transform can produce.
pub trait POutput {
    /// The PCollections it consists of, by tag.
    fn pcollections(&self) -> Vec<(String, usize)>;
}

/// The input of root transforms (Create, Impulse, reads).
#[derive(Clone)]
pub struct PBegin(pub(crate) Pipeline);

impl PInput for PBegin {
    fn pipeline(&self) -> &Pipeline {
        &self.0
    }
    fn pcollections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }
}

impl<T: Element> PInput for PCollection<T> {
    fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
    fn pcollections(&self) -> Vec<(String, usize)> {
        vec![("input".into(), self.id)]
    }
}

impl<T: Element> POutput for PCollection<T> {
    fn pcollections(&self) -> Vec<(String, usize)> {
        vec![(crate::dofn::MAIN_TAG.into(), self.id)]
    }
}

impl<T: Element> PInput for Vec<PCollection<T>> {
    fn pipeline(&self) -> &Pipeline {
        &self
            .first()
            .expect(
                "an empty list of PCollections has no pipeline; Flatten needs at least one input",
            )
            .pipeline
    }
    fn pcollections(&self) -> Vec<(String, usize)> {
        self.iter()
            .enumerate()
            .map(|(i, p)| (i.to_string(), p.id))
            .collect()
    }
}

impl<T: Element> POutput for Vec<PCollection<T>> {
    fn pcollections(&self) -> Vec<(String, usize)> {
        self.iter()
            .enumerate()
            .map(|(i, p)| (i.to_string(), p.id))
            .collect()
    }
}

impl<A: Element, B: Element> PInput for (PCollection<A>, PCollection<B>) {
    fn pipeline(&self) -> &Pipeline {
        &self.0.pipeline
    }
    fn pcollections(&self) -> Vec<(String, usize)> {
        vec![("0".into(), self.0.id), ("1".into(), self.1.id)]
    }
}

impl<A: Element, B: Element> POutput for (PCollection<A>, PCollection<B>) {
    fn pcollections(&self) -> Vec<(String, usize)> {
        vec![("0".into(), self.0.id), ("1".into(), self.1.id)]
    }
}

impl<A: Element, B: Element, C: Element> POutput
    for (PCollection<A>, PCollection<B>, PCollection<C>)
{
    fn pcollections(&self) -> Vec<(String, usize)> {
        vec![
            ("0".into(), self.0.id),
            ("1".into(), self.1.id),
            ("2".into(), self.2.id),
        ]
    }
}

impl POutput for () {
    fn pcollections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }
}
