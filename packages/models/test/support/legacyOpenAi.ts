/**
 * The OpenAI (Responses) model as `@musekit/models` built it over `@effect/ai-openai`'s
 * `OpenAiLanguageModel` before it spoke the API itself: the reference the wire tests compare the
 * requests and the parts of the current one with.
 *
 * @example
 * ```ts
 * const old = legacyLayer("openai/gpt-4.1-mini", { env, baseUrl: `${server.url}/v1` })
 * ```
 */
import { LanguageModel } from "@effect/ai"
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import { FetchHttpClient, type HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Layer, type Scope, Stream } from "effect"
import { Models } from "../../src/index.js"
import { prepare } from "../../src/internal/construct.js"
import { strictWhereSafe } from "../../src/internal/openaiStrict.js"
import { jsonText } from "./streamBodies.js"

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

const make = (
  r: Models.Resolved,
  options: Models.Options
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

/** The model for an `openai/…` spec, as it was built over `@effect/ai-openai`. */
export const legacyLayer = (spec: string, options: Models.Options): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.scoped(
    LanguageModel.LanguageModel,
    Effect.flatMap(Effect.orDie(Models.resolve(spec, options)), (r) => make(r, options))
  ).pipe(Layer.provide(FetchHttpClient.layer))
