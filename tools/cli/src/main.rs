//! `tidewater`: watch and control a running job (see the library).

fn main() {
    match tidewater_cli::run(std::env::args_os()) {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("tidewater: {}", e.trim_end());
            std::process::exit(1);
        }
    }
}
