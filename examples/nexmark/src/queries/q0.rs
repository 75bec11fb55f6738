use crate::Event;
use tidewater::PCollection;

/// Q0, pass-through: every event, unchanged (measures the framework's overhead).
pub fn q0(events: &PCollection<Event>) -> PCollection<Event> {
    events.map("Q0.PassThrough", |e: Event| e)
}
