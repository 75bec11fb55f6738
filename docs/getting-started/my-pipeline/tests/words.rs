//! The test of docs/getting-started.md, step 4: a pipeline on the direct runner.

#[test]
fn counts_words() {
    tidewater_runners::register();
    let p = tidewater::Pipeline::new(tidewater::PipelineOptions::default());
    p.create("Lines", vec!["a b a".to_string()])
        .flat_map("Words", |l: String| {
            l.split(' ').map(String::from).collect::<Vec<_>>()
        })
        .apply("Count", tidewater_transforms::Count::per_element())
        .capture("counts");
    let counts = p
        .run()
        .unwrap()
        .captured_values::<(String, u64)>("counts")
        .unwrap();
    assert_eq!(counts, vec![("a".to_string(), 2), ("b".to_string(), 1)]);
}
