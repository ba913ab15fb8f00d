/**
 * @musekit/models — `provider/model` strings to @effect/ai `LanguageModel` layers: OpenAI
 * (Responses API), Anthropic, Google, and any OpenAI-compatible Chat Completions server (Ollama,
 * vLLM, llama.cpp, LM Studio, OpenRouter, Meta's Llama API), with shared retries and timeouts,
 * clear errors, normalized usage and a model table (context windows, prices).
 *
 * @example
 * ```ts
 * import { ModelInfo, Models } from "@musekit/models"
 *
 * const ModelLive = Models.layer("ollama/qwen2.5-coder:7b", { env: process.env })
 * ModelInfo.contextWindow("ollama/qwen2.5-coder:7b") // 32_768
 * ```
 */
export * as HttpPolicy from "./HttpPolicy.js"
export * as ModelInfo from "./ModelInfo.js"
export * as Models from "./Models.js"
export * as OpenAiCompatible from "./OpenAiCompatible.js"
export * as Provider from "./Provider.js"
