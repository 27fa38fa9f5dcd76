//! Prints the table section of docs/warehouse.md from the declared schemas:
//! `cargo run -p perfsweep-warehouse --example schema_markdown`, pasted into the guide
//! when a schema changes (`schema::tests::the_guide_documents_every_table_as_declared`
//! fails until it is).

fn main() {
    print!("{}", perfsweep_warehouse::schema::markdown());
}
