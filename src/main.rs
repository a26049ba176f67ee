fn main() {
    std::process::exit(synergy::cli::main());
}
