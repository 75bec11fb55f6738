pub fn register() {}
