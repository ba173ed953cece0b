// `sqlx::migrate!` embeds the migrations at compile time, but on stable Rust a new or changed
// file there does not rebuild this crate by itself (sqlx's "migrate build-script").
fn main() {
    println!("cargo:rerun-if-changed=../../migrations/sqlite");
}
