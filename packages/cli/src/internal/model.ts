/**
 * From a `provider/model` spec to a `LanguageModel` layer. Provider code is loaded only when a
 * real provider is used; `scripted/<name>` is the test model of `scripted.ts`.
 */
import type { LanguageModel } from "@effect/ai"
import { Effect, Either, Layer } from "effect"
import type { ModelChoice } from "./config.js"
import { CliError, ExitCode } from "./exit.js"
import * as Scripted from "./scripted.js"

/** The model used when none is configured, by the API key that is set. */
export const defaults: ReadonlyArray<{ readonly variable: string; readonly spec: string }> = [
  { variable: "ANTHROPIC_API_KEY", spec: "anthropic/claude-sonnet-4-5" },
  { variable: "OPENAI_API_KEY", spec: "openai/gpt-4.1" },
  { variable: "GEMINI_API_KEY", spec: "google/gemini-2.5-pro" },
  { variable: "GOOGLE_API_KEY", spec: "google/gemini-2.5-pro" }
]

export const defaultFor = (env: NodeJS.ProcessEnv): ModelChoice | undefined => {
  const hit = defaults.find((d) => (env[d.variable] ?? "").trim() !== "")
  return hit ? { spec: hit.spec, source: `${hit.variable} is set` } : undefined
}

/** The one screen shown when there is no model to talk to. */
export const noKeyScreen = (problem?: string): string =>
  [
    ...(problem ? [problem, ""] : []),
    "muse needs a language model to talk to.",
    "",
    "Set an API key for a hosted provider:",
    "  export ANTHROPIC_API_KEY=...   uses anthropic/claude-sonnet-4-5",
    "  export OPENAI_API_KEY=...      uses openai/gpt-4.1",
    "  export GEMINI_API_KEY=...      uses google/gemini-2.5-pro",
    "",
    "Or use a local OpenAI-compatible server (no key needed):",
    "  muse --model ollama/qwen2.5-coder       Ollama on 127.0.0.1:11434",
    "  muse --model lmstudio/<model>           also vllm/, llamacpp/",
    "  OPENAI_COMPATIBLE_BASE_URL=http://host:8000/v1 \\",
    "    muse --model openai-compatible/<model>",
    "",
    'Keep a choice: "model": "<provider/model>" in ~/.config/muse/config.json',
    "or .muse/config.json, or export MUSE_MODEL=<provider/model>.",
    "",
    "No key yet? Watch a recorded session:  muse replay --example"
  ].join("\n")

export interface Options {
  readonly env: NodeJS.ProcessEnv
  readonly scriptFlag?: string | undefined
  readonly onRequest?: (() => void) | undefined
}

/** Check a spec without building anything (no network). */
export const check = (spec: string, options: Options): Effect.Effect<void, CliError> =>
  Effect.asVoid(languageModel(spec, options))

/** The `LanguageModel` layer for a spec; a config problem is a `CliError` with exit code 2. */
export const languageModel = (
  spec: string,
  options: Options
): Effect.Effect<Layer.Layer<LanguageModel.LanguageModel>, CliError> =>
  Effect.gen(function* () {
    if (Scripted.isScripted(spec) || options.scriptFlag) {
      const file = yield* Scripted.scriptFile(spec, options)
      const script = yield* Scripted.load(file)
      return Scripted.layer(script, { onRequest: options.onRequest })
    }
    const { Models } = yield* Effect.promise(() => import("@musekit/models"))
    const resolved = Models.resolve(spec, { env: options.env })
    if (Either.isLeft(resolved)) {
      const e = resolved.left
      return yield* new CliError({
        code: ExitCode.Usage,
        message: e.message,
        detail: e.reason === "MissingApiKey" ? noKeyScreen() : undefined
      })
    }
    return Models.layer(spec, { env: options.env }).pipe(Layer.orDie)
  })
