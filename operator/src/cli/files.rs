//! Reading YAML documents from files or stdin.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// One document of an input file, with where it came from.
pub struct Input {
    pub file: PathBuf,
    /// 1-based position in its file.
    pub index: usize,
    pub document: Value,
}

impl Input {
    /// `file` or `file#2` when the file holds several documents.
    pub fn location(&self, documents_in_file: usize) -> String {
        if documents_in_file > 1 {
            format!("{}#{}", self.file.display(), self.index)
        } else {
            self.file.display().to_string()
        }
    }
}

/// Every document of every file, in order. A file that cannot be read or parsed, or
/// that holds no document, is an error naming the file.
pub fn read_all(files: &[PathBuf]) -> anyhow::Result<Vec<(usize, Vec<Input>)>> {
    files
        .iter()
        .map(|file| {
            let text = read(file)?;
            let documents = perfsweep_benchmarks::formats::yaml::documents(&text)
                .with_context(|| format!("{}: not valid YAML", file.display()))?;
            let count = documents.len();
            // An empty file is a mistake (the wrong file, a failed redirect), not a
            // valid sweep of nothing.
            anyhow::ensure!(
                count > 0,
                "{}: no documents (the file is empty or holds only comments)",
                file.display()
            );
            let inputs = documents
                .into_iter()
                .enumerate()
                .map(|(i, document)| Input {
                    file: file.clone(),
                    index: i + 1,
                    document,
                })
                .collect();
            Ok((count, inputs))
        })
        .collect()
}

fn read(file: &Path) -> anyhow::Result<String> {
    if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}

/// Prints on stderr what was converted in a document (kube-perftest's group, an OME
/// BenchmarkJob, inline credentials moved into a Secret).
pub fn tell_conversions(
    location: &str,
    document: &perfsweep_benchmarks::input::document::Document,
) {
    for message in document.conversion_messages() {
        match message.split_once(": ") {
            Some((level, text)) => eprintln!("{level}: {location}: {text}"),
            None => eprintln!("{location}: {message}"),
        }
    }
}
