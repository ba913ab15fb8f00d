/**
 * The Google provider (Gemini `generateContent`) on its own: `@musekit/models/google` loads Google's
 * client and nothing of the other providers. `Models.layer("google/…")` loads this module when it is
 * first used.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import * as Google from "@musekit/models/google"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(Google.layer("gemini-2.5-flash", { env: process.env }))
 * )
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import * as GoogleClient from "@effect/ai-google/GoogleClient"
import * as GoogleLanguageModel from "@effect/ai-google/GoogleLanguageModel"
import type { HttpClient } from "@effect/platform"
import { Effect, type Layer, type Scope } from "effect"
import { prepare } from "./internal/construct.js"
import * as Models from "./Models.js"

/** Builds the model for a resolved `google/…` spec (see `Models.resolve`). */
export const make = (
  r: Models.Resolved,
  options: Models.Options = {}
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const { transform, config, finish } = prepare(r, options)
    if (options.maxOutputTokens !== undefined) {
      config.generationConfig = {
        ...(config.generationConfig as object | undefined),
        maxOutputTokens: options.maxOutputTokens
      }
    }
    const client = yield* GoogleClient.make({ apiKey: r.apiKey, apiUrl: r.baseUrl, transformClient: transform })
    const inner = yield* GoogleLanguageModel.make({
      model: r.model,
      config: { toolConfig: {}, ...config } as any
    }).pipe(Effect.provideService(GoogleClient.GoogleClient, client))
    return finish(inner)
  })

/** The `LanguageModel` layer for a Gemini model id, over Node's HTTP client. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`google/${model}`, options)
