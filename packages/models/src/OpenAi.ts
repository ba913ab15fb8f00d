/**
 * The OpenAI provider (Responses API, `POST /responses`) on its own: `@musekit/models/openai` loads
 * nothing of the other providers, and no OpenAI client package either: requests are encoded (each
 * history message once per session) and streamed events read by MuseKit itself. The request body is
 * the one `@effect/ai-openai`'s language model sends for the same call, byte for byte, with each tool
 * (and JSON response format) sent with `strict: true` only where its schema allows it.
 * `Models.layer("openai/…")` loads this module when it is first used.
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
import { IdGenerator, LanguageModel } from "@effect/ai"
import { HttpBody, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Chunk, Effect, type Layer, Option, Redacted, type Scope, Stream } from "effect"
import { prepare } from "./internal/construct.js"
import { mapHttpErrors, sseEvents } from "./internal/http.js"
import { bytesOf } from "./internal/joinJson.js"
import { fromResponse, isLast, parseEvent, requestPieces, StreamAssembler } from "./internal/responses.js"
import * as Models from "./Models.js"

/**
 * The context key of `@effect/ai-openai`'s `OpenAiLanguageModel.Config`: overrides made with its
 * `withConfigOverride` apply here too (read by key, so that package is not loaded).
 */
const overrideKey = "@effect/ai-openai/OpenAiLanguageModel/Config"

const module = "OpenAiClient"

/** Builds the model for a resolved `openai/…` spec (see `Models.resolve`). */
export const make = (
  r: Models.Resolved,
  options: Models.Options = {}
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const { transform, config, finish } = prepare(r, options)
    const fixStrict = config.strict === undefined
    if (options.maxOutputTokens !== undefined) config.max_output_tokens = options.maxOutputTokens
    const base = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest((request) => {
        let out = HttpClientRequest.prependUrl(request, r.baseUrl)
        if (r.apiKey !== undefined) out = HttpClientRequest.bearerToken(out, Redacted.value(r.apiKey))
        return HttpClientRequest.acceptJson(out)
      }),
      transform
    )
    const client = HttpClient.filterStatusOk(base)

    const body = (providerOptions: LanguageModel.ProviderOptions, stream: boolean) =>
      Effect.flatMap(Effect.context<never>(), (context) => {
        const override = context.unsafeMap.get(overrideKey) as Record<string, unknown> | undefined
        return requestPieces({ model: r.model, ...config, ...override }, providerOptions, fixStrict, stream)
      })

    const request = (pieces: ReadonlyArray<string>) =>
      HttpClientRequest.post("/responses", { body: HttpBody.uint8Array(bytesOf(pieces), "application/json") })

    const generateText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, false)
        const json = yield* client.execute(request(payload)).pipe(
          Effect.flatMap((response: HttpClientResponse.HttpClientResponse) => response.json),
          mapHttpErrors(module, "createResponse")
        )
        return yield* fromResponse(json, providerOptions)
      })

    const streamText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, true)
        const assembler = new StreamAssembler(yield* IdGenerator.IdGenerator, providerOptions)
        return sseEvents(client.execute(request(payload)), module).pipe(
          // events that are not JSON objects with a type (keep-alives, …) are skipped
          Stream.mapChunks((events) => Chunk.filterMap(events, (event) => Option.fromNullable(parseEvent(event.data)))),
          Stream.takeUntil(isLast),
          Stream.chunks,
          Stream.flatMap((events) =>
            Stream.unwrap(
              Effect.map(assembler.chunks(events), ({ parts, error }) =>
                error === undefined
                  ? Stream.fromChunk(parts)
                  : Stream.concat(Stream.fromChunk(parts), Stream.fail(error))
              )
            )
          )
        )
      }).pipe(Stream.unwrap)

    const inner = yield* LanguageModel.make({ generateText, streamText })
    return finish(inner)
  })

/** The `LanguageModel` layer for an OpenAI model id, over Node's HTTP client. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`openai/${model}`, options)
