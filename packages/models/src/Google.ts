/**
 * The Google provider: Gemini's `generateContent` API (`POST {apiUrl}/v1beta/models/{model}:generateContent`,
 * streamed with `:streamGenerateContent?alt=sse`, key in `x-goog-api-key`), spoken directly on
 * @effect/ai's `LanguageModel`: no provider package to install. Tool calls go out as
 * `functionDeclarations` and come back as `functionCall` parts, tool results as `functionResponse`
 * parts; images and files go inline; thinking comes back as reasoning; usage counts cached content
 * and thinking tokens. `Models.layer("google/…")` loads this module when it is first used.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import * as Google from "@musekit/models/google"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(
 *     Google.layer("gemini-2.5-flash", { env: process.env, config: { generationConfig: { temperature: 0 } } })
 *   )
 * )
 * ```
 */
import { IdGenerator, LanguageModel } from "@effect/ai"
import { Headers, HttpBody, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect, type Layer, Redacted, type Scope, Stream } from "effect"
import { prepare } from "./internal/construct.js"
import { fromResponse, StreamAssembler, toRequest } from "./internal/gemini.js"
import { mapHttpErrors, sseEvents } from "./internal/http.js"
import * as Models from "./Models.js"

const module = "Google"
const apiKeyHeader = "x-goog-api-key"

interface AdapterOptions {
  readonly model: string
  readonly apiUrl: string
  readonly apiKey: Redacted.Redacted | undefined
  readonly provider: string
  /** Request fields sent with every call (`generationConfig`, `safetySettings`, `toolConfig`, …). */
  readonly config: Record<string, unknown>
  readonly transformClient: (client: HttpClient.HttpClient) => HttpClient.HttpClient
}

/** The path of a model's method: `models/` is the collection, whether or not the id names it. */
const modelPath = (model: string, method: string) =>
  `/v1beta/models/${encodeURIComponent(model.replace(/^models\//, ""))}:${method}`

const adapter = (
  options: AdapterOptions
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    // the key never shows in logged requests or errors
    yield* Effect.locallyScopedWith(Headers.currentRedactedNames, (names) => [...names, apiKeyHeader])
    const apiUrl = options.apiUrl.replace(/\/+$/, "")
    const client = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest((request) => {
        let r = HttpClientRequest.prependUrl(request, apiUrl).pipe(HttpClientRequest.acceptJson)
        if (options.apiKey !== undefined)
          r = HttpClientRequest.setHeader(r, apiKeyHeader, Redacted.value(options.apiKey))
        return r
      }),
      options.transformClient,
      HttpClient.filterStatusOk
    )

    const generateText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* toRequest(providerOptions, options.model, options.config)
        const json = yield* client
          .execute(
            HttpClientRequest.post(modelPath(options.model, "generateContent"), { body: HttpBody.unsafeJson(payload) })
          )
          .pipe(
            Effect.flatMap((response: HttpClientResponse.HttpClientResponse) => response.json),
            mapHttpErrors(module, "generateText")
          )
        return yield* fromResponse(options.provider, json)
      })

    const streamText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* toRequest(providerOptions, options.model, options.config)
        const assembler = new StreamAssembler(options.provider, yield* IdGenerator.IdGenerator)
        const request = HttpClientRequest.post(`${modelPath(options.model, "streamGenerateContent")}?alt=sse`, {
          body: HttpBody.unsafeJson(payload)
        })
        return sseEvents(client.execute(request), module).pipe(
          Stream.mapEffect((event) => assembler.chunk(event.data)),
          Stream.takeUntil(() => assembler.complete),
          Stream.flattenIterables,
          // without a finish part when the stream was cut: the wrapper asks again or says so
          Stream.concat(Stream.suspend(() => Stream.fromIterable(assembler.finish())))
        )
      }).pipe(Stream.unwrap)

    return yield* LanguageModel.make({ generateText, streamText })
  })

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
    const inner = yield* adapter({
      model: r.model,
      apiUrl: r.baseUrl,
      apiKey: r.apiKey,
      provider: r.provider.name,
      config,
      transformClient: transform
    })
    return finish(inner)
  })

/** The `LanguageModel` layer for a Gemini model id, over the runtime's `fetch`. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`google/${model}`, options)
