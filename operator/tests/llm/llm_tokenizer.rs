//! The tokenizers the load generator counts with: tokenizer.json files give the ids
//! Hugging Face `tokenizers` gives (fixtures made by tests/fixtures/llm/make_tokenizers.py),
//! and synthetic prompts have exactly the token count asked for, with every tokenizer.

use perfsweep_llm::rng::Rng;
use perfsweep_llm::tokenizer::{PromptWords, Tokenizer};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/llm/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn all_tokenizers() -> Vec<Tokenizer> {
    [
        "builtin:cl100k_base".to_owned(),
        "builtin:o200k_base".to_owned(),
        fixture("gpt2-style.tokenizer.json"),
        fixture("llama3-style.tokenizer.json"),
    ]
    .iter()
    .map(|spec| Tokenizer::load(spec).expect("loads"))
    .collect()
}

#[test]
fn tokenizer_json_files_encode_exactly_like_hugging_face_tokenizers() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tokenizer-expected.json")).expect("fixture"),
    )
    .expect("json");
    for style in ["gpt2-style", "llama3-style"] {
        let tokenizer =
            Tokenizer::load(&fixture(&format!("{style}.tokenizer.json"))).expect("loads");
        let cases = expected[style].as_array().expect("cases");
        assert!(cases.len() > 10);
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let ids: Vec<u32> = case["ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|id| id.as_u64().expect("id") as u32)
                .collect();
            assert_eq!(tokenizer.encode(text), ids, "{style}: {text:?}");
        }
    }
}

#[test]
fn every_tokenizer_has_words_to_build_prompts_from() {
    for tokenizer in all_tokenizers() {
        let words = PromptWords::for_tokenizer(&tokenizer).expect("prompt words");
        assert!(words.len() >= 8, "{tokenizer:?}: {}", words.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn synthetic_prompts_have_exactly_the_requested_token_count(
        tokens in 1u32..3000,
        seed in any::<u64>(),
    ) {
        thread_local! {
            static TOKENIZERS: Vec<(Tokenizer, PromptWords)> = all_tokenizers()
                .into_iter()
                .map(|t| { let w = PromptWords::for_tokenizer(&t).expect("words"); (t, w) })
                .collect();
        }
        TOKENIZERS.with(|tokenizers| {
            for (tokenizer, words) in tokenizers {
                let mut prompt = String::new();
                words.prompt(&mut Rng::new(seed), tokens, &mut prompt);
                prop_assert_eq!(tokenizer.count(&prompt), tokens as usize, "{:?}", tokenizer);
            }
            Ok(())
        })?;
    }
}
