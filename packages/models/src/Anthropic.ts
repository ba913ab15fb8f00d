/**
 * The Anthropic provider (Messages API) on its own: `@musekit/models/anthropic` loads only what the
 * Messages API needs. `Models.layer("anthropic/…")` loads this module when it is first used.
 *
 * Requests and responses go through MuseKit's own codec (`internal/anthropicMessages.ts`): each
 * history message is encoded once per session, not once per request, and the stream is read without
 * Schema. The request body is byte for byte the one `@effect/ai-anthropic` sends for the same prompt,
 * so a prompt cache built by either carries over; its per-call config override
 * (`AnthropicLanguageModel.withConfigOverride`) is honoured.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import * as Anthropic from "@musekit/models/anthropic"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(Anthropic.layer("claude-sonnet-4-5", { env: process.env }))
 * )
 * ```
 */
import { AiError, IdGenerator, LanguageModel } from "@effect/ai"
import { Headers, HttpBody, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { type Context, Effect, type Layer, Redacted, type Scope, Stream } from "effect"
import { fromMessage, requestBody, StreamDecoder } from "./internal/anthropicMessages.js"
import { prepare } from "./internal/construct.js"
import { mapHttpErrors, sseEvents } from "./internal/http.js"
import { bytesOf } from "./internal/joinJson.js"
import * as ModelInfo from "./ModelInfo.js"
import * as Models from "./Models.js"

/** The key of `AnthropicLanguageModel.Config` (per-call overrides made with its `withConfigOverride`). */
const configKey = "@effect/ai-anthropic/AnthropicLanguageModel/Config"

const module = "AnthropicLanguageModel"

/** Builds the model for a resolved `anthropic/…` spec (see `Models.resolve`). */
export const make = (
  r: Models.Resolved,
  options: Models.Options = {}
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const { transform, config, finish } = prepare(r, options)
    config.max_tokens =
      options.maxOutputTokens ?? config.max_tokens ?? Math.min(ModelInfo.maxOutputTokens(r.model), 16_384)
    yield* Effect.locallyScopedWith(Headers.currentRedactedNames, (names) => [...names, "x-api-key"])
    const apiKey = r.apiKey === undefined ? undefined : Redacted.value(r.apiKey)
    const client = HttpClient.filterStatusOk(
      (yield* HttpClient.HttpClient).pipe(
        HttpClient.mapRequest((request) => {
          let out = HttpClientRequest.prependUrl(request, r.baseUrl)
          if (apiKey !== undefined) out = HttpClientRequest.setHeader(out, "x-api-key", apiKey)
          return HttpClientRequest.acceptJson(HttpClientRequest.setHeader(out, "anthropic-version", "2023-06-01"))
        }),
        transform
      )
    )
    const base = { model: r.model, ...config }

    // the request's JSON text, with each history message encoded once per session (not once per request)
    const body = (providerOptions: LanguageModel.ProviderOptions, stream: boolean) =>
      Effect.contextWith((context: Context.Context<never>) => {
        const override = context.unsafeMap.get(configKey) as Record<string, unknown> | undefined
        return requestBody(providerOptions, override === undefined ? base : { ...base, ...override }, stream)
      }).pipe(
        Effect.catchAllDefect((e) => (AiError.isAiError(e) ? Effect.fail(e) : Effect.die(e))),
        Effect.map(({ beta, pieces }) => {
          const request = HttpClientRequest.post(stream ? "/v1/messages" : "/v1/messages?beta=true", {
            body: HttpBody.uint8Array(bytesOf(pieces), "application/json")
          })
          return beta === undefined ? request : HttpClientRequest.setHeader(request, "anthropic-beta", beta)
        })
      )

    // ids for the source parts of citations (the id generator of the call's context)
    const nextId = Effect.map(IdGenerator.IdGenerator, (ids) => () => Effect.runSync(ids.generateId()))

    const generateText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const request = yield* body(providerOptions, false)
        const json = yield* client.execute(request).pipe(
          Effect.flatMap((response: HttpClientResponse.HttpClientResponse) => response.json),
          mapHttpErrors(module, "generateText")
        )
        const parts = fromMessage(json, providerOptions, yield* nextId)
        return Array.isArray(parts) ? parts : yield* parts
      })

    const streamText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.zipWith(body(providerOptions, true), nextId, (request, next) => {
        const decoder = new StreamDecoder(providerOptions.prompt, next)
        return sseEvents(client.execute(request), module).pipe(
          // the end of the response, named by its event or (a server that names none) by its data alone
          Stream.takeUntil(
            (event) =>
              event.event === "message_stop" || (event.data.length < 40 && event.data.includes('"message_stop"'))
          ),
          Stream.chunks,
          Stream.flatMap((events) => {
            const { error, parts } = decoder.events(events)
            return error === undefined
              ? Stream.fromChunk(parts)
              : Stream.concat(Stream.fromChunk(parts), Stream.fail(error))
          })
        )
      }).pipe(Stream.unwrap)

    return finish(yield* LanguageModel.make({ generateText, streamText }))
  })

/** The `LanguageModel` layer for an Anthropic model id, over Node's HTTP client. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`anthropic/${model}`, options)
