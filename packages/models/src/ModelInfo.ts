/**
 * What MuseKit knows about models: context window, output limit and list price, in ONE table for
 * every provider. Lookups accept a bare id (`claude-sonnet-4-5-20250929`), a `provider/model` spec
 * (`anthropic/claude-sonnet-4-5`), a gateway id (`openrouter/anthropic/claude-sonnet-4.5`) or a local
 * tag (`ollama/qwen2.5-coder:7b`): the longest known id that prefixes the model wins. Unknown
 * models get a conservative default window and no price.
 *
 * Prices are US dollars per million tokens (list prices for standard, non-batch requests at the
 * lowest context tier). Cached input is the price of a cache read.
 *
 * @example
 * ```ts
 * import { ModelInfo } from "@musekit/models"
 *
 * ModelInfo.contextWindow("anthropic/claude-sonnet-4-5") // 200_000
 * ModelInfo.cost("openai/gpt-4.1-mini", { inputTokens: 1_000_000, outputTokens: 0, cachedInputTokens: 0 }) // 0.4
 * ModelInfo.contextWindow("some/new-model") // 32_768 (ModelInfo.defaultContextWindow)
 * ```
 */

/** US dollars per million tokens. */
export interface Pricing {
  readonly input: number
  readonly output: number
  /** Price of input tokens read from the prompt cache; the input price applies when absent. */
  readonly cachedInput?: number | undefined
}

/** One row of the table. */
export interface Info {
  /** The model id (without date suffix or tag). */
  readonly id: string
  /** The family it belongs to: "openai", "anthropic", "google" or "open" (open-weight models). */
  readonly family: "openai" | "anthropic" | "google" | "open"
  /** Total context window in tokens (input + output). */
  readonly contextWindow: number
  /** Most tokens one response may contain. */
  readonly maxOutputTokens: number
  /** List price, where well known. */
  readonly pricing?: Pricing | undefined
}

/** Window assumed for models not in the table: small enough to be safe on most servers. */
export const defaultContextWindow = 32_768

/** Output limit assumed for models not in the table. */
export const defaultMaxOutputTokens = 8_192

const row = (
  family: Info["family"],
  id: string,
  contextWindow: number,
  maxOutputTokens: number,
  pricing?: Pricing
): Info =>
  pricing === undefined
    ? { id, family, contextWindow, maxOutputTokens }
    : { id, family, contextWindow, maxOutputTokens, pricing }

const p = (input: number, output: number, cachedInput?: number): Pricing =>
  cachedInput === undefined ? { input, output } : { input, output, cachedInput }

/** The table. */
export const table: ReadonlyArray<Info> = [
  // OpenAI
  row("openai", "gpt-5", 400_000, 128_000, p(1.25, 10, 0.125)),
  row("openai", "gpt-5-codex", 400_000, 128_000, p(1.25, 10, 0.125)),
  row("openai", "gpt-5-mini", 400_000, 128_000, p(0.25, 2, 0.025)),
  row("openai", "gpt-5-nano", 400_000, 128_000, p(0.05, 0.4, 0.005)),
  row("openai", "gpt-5.1", 400_000, 128_000, p(1.25, 10, 0.125)),
  row("openai", "gpt-4.1", 1_047_576, 32_768, p(2, 8, 0.5)),
  row("openai", "gpt-4.1-mini", 1_047_576, 32_768, p(0.4, 1.6, 0.1)),
  row("openai", "gpt-4.1-nano", 1_047_576, 32_768, p(0.1, 0.4, 0.025)),
  row("openai", "gpt-4o", 128_000, 16_384, p(2.5, 10, 1.25)),
  row("openai", "gpt-4o-mini", 128_000, 16_384, p(0.15, 0.6, 0.075)),
  row("openai", "o1", 200_000, 100_000, p(15, 60, 7.5)),
  row("openai", "o1-pro", 200_000, 100_000, p(150, 600)),
  row("openai", "o3", 200_000, 100_000, p(2, 8, 0.5)),
  row("openai", "o3-pro", 200_000, 100_000, p(20, 80)),
  row("openai", "o3-mini", 200_000, 100_000, p(1.1, 4.4, 0.55)),
  row("openai", "o4-mini", 200_000, 100_000, p(1.1, 4.4, 0.275)),
  row("openai", "codex-mini-latest", 200_000, 100_000, p(1.5, 6, 0.375)),
  row("open", "gpt-oss-120b", 131_072, 32_768),
  row("open", "gpt-oss-20b", 131_072, 32_768),
  row("open", "gpt-oss", 131_072, 32_768),
  // Anthropic (cache writes cost 1.25x input; not in the table)
  row("anthropic", "claude-opus-4-5", 200_000, 64_000, p(5, 25, 0.5)),
  row("anthropic", "claude-opus-4-1", 200_000, 32_000, p(15, 75, 1.5)),
  row("anthropic", "claude-opus-4", 200_000, 32_000, p(15, 75, 1.5)),
  row("anthropic", "claude-sonnet-4-5", 200_000, 64_000, p(3, 15, 0.3)),
  row("anthropic", "claude-sonnet-4", 200_000, 64_000, p(3, 15, 0.3)),
  row("anthropic", "claude-haiku-4-5", 200_000, 64_000, p(1, 5, 0.1)),
  row("anthropic", "claude-3-7-sonnet", 200_000, 64_000, p(3, 15, 0.3)),
  row("anthropic", "claude-3-5-sonnet", 200_000, 8_192, p(3, 15, 0.3)),
  row("anthropic", "claude-3-5-haiku", 200_000, 8_192, p(0.8, 4, 0.08)),
  row("anthropic", "claude-3-opus", 200_000, 4_096, p(15, 75, 1.5)),
  row("anthropic", "claude-3-haiku", 200_000, 4_096, p(0.25, 1.25, 0.03)),
  // Google (prices for prompts up to 200k tokens)
  row("google", "gemini-3-pro-preview", 1_048_576, 65_536, p(2, 12, 0.2)),
  row("google", "gemini-2.5-pro", 1_048_576, 65_536, p(1.25, 10, 0.31)),
  row("google", "gemini-2.5-flash", 1_048_576, 65_536, p(0.3, 2.5, 0.075)),
  row("google", "gemini-2.5-flash-lite", 1_048_576, 65_536, p(0.1, 0.4, 0.025)),
  row("google", "gemini-2.0-flash", 1_048_576, 8_192, p(0.1, 0.4, 0.025)),
  row("google", "gemini-2.0-flash-lite", 1_048_576, 8_192, p(0.075, 0.3)),
  row("google", "gemini-1.5-pro", 2_097_152, 8_192, p(1.25, 5)),
  row("google", "gemini-1.5-flash", 1_048_576, 8_192, p(0.075, 0.3)),
  // Open-weight models as served by Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, the Llama API.
  // The window is the model's; a local server may be configured with a smaller one (Ollama: num_ctx).
  row("open", "llama-4-maverick", 1_048_576, 16_384),
  row("open", "llama-4-scout", 131_072, 16_384),
  row("open", "llama-3.3", 131_072, 8_192),
  row("open", "llama3.3", 131_072, 8_192),
  row("open", "llama-3.2", 131_072, 8_192),
  row("open", "llama3.2", 131_072, 8_192),
  row("open", "llama-3.1", 131_072, 8_192),
  row("open", "llama3.1", 131_072, 8_192),
  row("open", "llama3", 8_192, 4_096),
  row("open", "qwen3-coder", 262_144, 65_536),
  row("open", "qwen3", 40_960, 16_384),
  row("open", "qwen2.5-coder", 32_768, 8_192),
  row("open", "qwen2.5", 32_768, 8_192),
  row("open", "deepseek-r1", 131_072, 32_768),
  row("open", "deepseek-v3", 131_072, 16_384),
  row("open", "deepseek-coder-v2", 131_072, 8_192),
  row("open", "devstral", 131_072, 16_384),
  row("open", "mistral-small", 131_072, 16_384),
  row("open", "mistral", 32_768, 8_192),
  row("open", "codestral", 262_144, 16_384),
  row("open", "gemma3", 131_072, 8_192),
  row("open", "phi4", 16_384, 4_096),
  row("open", "codellama", 16_384, 4_096)
]

const boundary = /[-:@._/]/

const candidates = (model: string): Array<string> => {
  const m = model.trim().toLowerCase()
  const out = [m]
  // `provider/model`, `openrouter/vendor/model`: also try each suffix after a slash
  let i = m.indexOf("/")
  while (i !== -1) {
    out.push(m.slice(i + 1))
    i = m.indexOf("/", i + 1)
  }
  // Gateways write Claude versions with dots ("claude-sonnet-4.5"); the table uses dashes.
  for (const c of [...out]) if (c.startsWith("claude-")) out.push(c.replace(/\./g, "-"))
  return out
}

const byLength = [...table].sort((a, b) => b.id.length - a.id.length)

/** The row for a model id or spec, if the table knows it. */
export const lookup = (model: string): Info | undefined => {
  for (const c of candidates(model)) {
    const hit = byLength.find((r) => c === r.id || (c.startsWith(r.id) && boundary.test(c.charAt(r.id.length))))
    if (hit !== undefined) return hit
  }
  return undefined
}

/** The context window in tokens; `defaultContextWindow` for unknown models. */
export const contextWindow = (model: string): number => lookup(model)?.contextWindow ?? defaultContextWindow

/** The output limit in tokens; `defaultMaxOutputTokens` for unknown models. */
export const maxOutputTokens = (model: string): number => lookup(model)?.maxOutputTokens ?? defaultMaxOutputTokens

/** The token counts `cost` needs; `Response.Usage` fits. */
export interface UsageLike {
  /** All prompt tokens, cached ones included. */
  readonly inputTokens?: number | undefined
  /** All generated tokens, reasoning included. */
  readonly outputTokens?: number | undefined
  /** The part of `inputTokens` read from the prompt cache. */
  readonly cachedInputTokens?: number | undefined
}

/**
 * The list price of one call in US dollars, or `undefined` when the model's price is not known
 * (local and unknown models).
 */
export const cost = (model: string, usage: UsageLike): number | undefined => {
  const pricing = lookup(model)?.pricing
  if (pricing === undefined) return undefined
  const input = usage.inputTokens ?? 0
  const cached = Math.min(usage.cachedInputTokens ?? 0, input)
  const output = usage.outputTokens ?? 0
  const dollars =
    ((input - cached) * pricing.input + cached * (pricing.cachedInput ?? pricing.input) + output * pricing.output) /
    1_000_000
  return Math.round(dollars * 1e9) / 1e9
}
