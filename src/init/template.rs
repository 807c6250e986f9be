//! `perfgate init --server NAME`: a scenario file whose `server:` block starts that server as
//! docs/servers.md teaches (the served model's name, fixed threads or GPU, the metrics flag, a
//! readiness probe, a log file), instead of the simulator example.

/// A server `init --server` has a template for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerTemplate {
    /// llama.cpp's `llama-server`.
    #[value(name = "llama-server")]
    LlamaServer,
    /// vLLM (`vllm serve`).
    Vllm,
    /// SGLang (`python3 -m sglang.launch_server`).
    Sglang,
    /// Ollama (`ollama serve`).
    Ollama,
}

impl ServerTemplate {
    /// Every template, in the order `--help` lists them.
    pub const ALL: [ServerTemplate; 4] = [
        ServerTemplate::LlamaServer,
        ServerTemplate::Vllm,
        ServerTemplate::Sglang,
        ServerTemplate::Ollama,
    ];

    /// The name on the command line, and of the scenario file (`scenarios/NAME.yaml`).
    pub fn name(self) -> &'static str {
        match self {
            ServerTemplate::LlamaServer => "llama-server",
            ServerTemplate::Vllm => "vllm",
            ServerTemplate::Sglang => "sglang",
            ServerTemplate::Ollama => "ollama",
        }
    }

    /// The scenario file.
    pub fn yaml(self) -> &'static str {
        match self {
            ServerTemplate::LlamaServer => include_str!("servers/llama-server.yaml"),
            ServerTemplate::Vllm => include_str!("servers/vllm.yaml"),
            ServerTemplate::Sglang => include_str!("servers/sglang.yaml"),
            ServerTemplate::Ollama => include_str!("servers/ollama.yaml"),
        }
    }

    /// The environment variables the template reads (empty: the scenario names everything),
    /// each passed from a repository variable of the same name in the workflow: the model, and
    /// llama-server's threads (a CI run with the template's 2 threads against a baseline blessed
    /// with 1 is a latency change no note names).
    pub fn vars(self) -> &'static [&'static str] {
        match self {
            ServerTemplate::LlamaServer => &["LLAMA_MODEL", "LLAMA_THREADS"],
            ServerTemplate::Vllm => &["VLLM_MODEL"],
            ServerTemplate::Sglang => &["SGLANG_MODEL"],
            ServerTemplate::Ollama => &[],
        }
    }

    /// What to set before the first bless.
    pub fn next_step(self) -> &'static str {
        match self {
            ServerTemplate::LlamaServer => {
                "set LLAMA_MODEL to your .gguf file (and LLAMA_THREADS), or edit scenarios/llama-server.yaml"
            }
            ServerTemplate::Vllm => {
                "set VLLM_MODEL to your model (a Hugging Face id or a directory), or edit scenarios/vllm.yaml"
            }
            ServerTemplate::Sglang => {
                "set SGLANG_MODEL to your model (a Hugging Face id or a directory), or edit scenarios/sglang.yaml"
            }
            ServerTemplate::Ollama => {
                "`ollama pull` the model named in scenarios/ollama.yaml (endpoint.model), or set it to one you have"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_command_line_names_are_the_file_names() {
        for t in ServerTemplate::ALL {
            let v = t.to_possible_value().unwrap();
            assert_eq!(v.get_name(), t.name());
            assert!(t
                .yaml()
                .contains(&format!("`perfgate init --server {}`", t.name())));
        }
        assert_eq!(ServerTemplate::value_variants(), &ServerTemplate::ALL);
    }
}
