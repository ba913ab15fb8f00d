/**
 * The OpenAI provider (Responses API) on its own: `@musekit/models/openai` loads OpenAI's client and
 * nothing of the other providers. `Models.layer("openai/…")` loads this module when it is first used.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import * as OpenAi from "@musekit/models/openai"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(OpenAi.layer("gpt-4.1", { env: process.env, config: { prompt_cache_key: "my-agent" } }))
 * )
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import { type HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Layer, type Scope, Stream } from "effect"
import { prepare } from "./internal/construct.js"
import { strictWhereSafe } from "./internal/openaiStrict.js"
import { jsonText } from "./internal/streamBodies.js"
import * as Models from "./Models.js"

/**
 * The OpenAI client with `createResponseStream` sending its body as text, and each request passed
 * through `prepare` first (the request object, before it is encoded).
 */
const openAiStreamAsText = (
  client: OpenAiClient.Service,
  prepare: <R extends Record<string, any>>(request: R) => R = (request) => request
): OpenAiClient.Service => ({
  ...client,
  createResponse: (options) => client.createResponse(prepare(options)),
  createResponseStream: (options) =>
    client
      .streamRequest(
        HttpClientRequest.post("/responses", { body: jsonText({ ...prepare(options), stream: true }) }),
        OpenAiClient.ResponseStreamEvent
      )
      .pipe(Stream.takeUntil((event) => event.type === "response.completed" || event.type === "response.incomplete"))
})

/** Builds the model for a resolved `openai/…` spec (see `Models.resolve`). */
export const make = (
  r: Models.Resolved,
  options: Models.Options = {}
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const { transform, config, finish } = prepare(r, options)
    const userStrict = config.strict !== undefined
    if (options.maxOutputTokens !== undefined) config.max_output_tokens = options.maxOutputTokens
    const client = openAiStreamAsText(
      yield* OpenAiClient.make({ apiKey: r.apiKey, apiUrl: r.baseUrl, transformClient: transform }),
      userStrict ? undefined : strictWhereSafe
    )
    const inner = yield* OpenAiLanguageModel.make({ model: r.model, config: config as any }).pipe(
      Effect.provideService(OpenAiClient.OpenAiClient, client)
    )
    return finish(inner)
  })

/** The `LanguageModel` layer for an OpenAI model id, over Node's HTTP client. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`openai/${model}`, options)
