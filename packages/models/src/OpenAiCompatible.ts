/**
 * A `LanguageModel` for any server that speaks OpenAI's Chat Completions API
 * (`POST {apiUrl}/chat/completions`): Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Meta's Llama
 * API and others. Streaming (SSE, `data: [DONE]`) and non-streaming, with tool calls: the prompt's
 * tool calls become assistant `tool_calls` and its tool results `role: "tool"` messages; streamed
 * tool-call argument fragments are assembled; usage includes cached and reasoning tokens.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { OpenAiCompatible } from "@musekit/models"
 * import { Effect } from "effect"
 *
 * const Llama = OpenAiCompatible.layer({ model: "llama3.2", apiUrl: "http://127.0.0.1:11434/v1", provider: "ollama" })
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   OpenAiCompatible.withConfigOverride({ temperature: 0 }),
 *   Effect.provide(Llama),
 *   Effect.provide(NodeHttpClient.layerUndici)
 * )
 * ```
 */
import { AiError, IdGenerator, LanguageModel } from "@effect/ai"
import * as Sse from "@effect/experimental/Sse"
import {
  HttpBody,
  HttpClient,
  type HttpClientError,
  HttpClientRequest,
  type HttpClientResponse
} from "@effect/platform"
import { Context, Effect, Layer, Redacted, Stream } from "effect"
import { fromCompletion, StreamAssembler, toMessages, toolFields } from "./internal/chatCompletions.js"

/** Request fields sent with every call (`temperature`, `max_tokens`, `seed`, `top_p`, …), verbatim. */
export class Config extends Context.Tag("@musekit/models/OpenAiCompatible/Config")<
  Config,
  Readonly<Record<string, unknown>>
>() {}

/** Options of the adapter. */
export interface Options {
  /** The model id as the server knows it. */
  readonly model: string
  /** Base URL including the version segment, e.g. `http://127.0.0.1:11434/v1`. */
  readonly apiUrl: string
  /** Sent as `Authorization: Bearer …` when present. */
  readonly apiKey?: Redacted.Redacted | undefined
  /** Name used in error messages (`ollama`, `openrouter`, …). Default `"openai-compatible"`. */
  readonly provider?: string | undefined
  /** Request fields sent with every call. */
  readonly config?: Readonly<Record<string, unknown>> | undefined
  /** Extra headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Ask for usage in streams (`stream_options.include_usage`). Default true. */
  readonly streamUsage?: boolean | undefined
  /** Transforms the HttpClient (retries, logging, …). */
  readonly transformClient?: ((client: HttpClient.HttpClient) => HttpClient.HttpClient) | undefined
}

/** Overrides request fields for the calls inside `self`. */
export const withConfigOverride =
  (overrides: Readonly<Record<string, unknown>>) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.serviceOption(Config), (current) =>
      Effect.provideService(self, Config, { ...(current._tag === "Some" ? current.value : {}), ...overrides })
    )

const module = "OpenAiCompatible"

/** Builds the `LanguageModel` service. */
export const make = (options: Options): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const provider = options.provider ?? "openai-compatible"
    const apiUrl = options.apiUrl.replace(/\/+$/, "")
    const base = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest((request) => {
        let r = HttpClientRequest.prependUrl(request, apiUrl).pipe(HttpClientRequest.acceptJson)
        if (options.apiKey !== undefined) r = HttpClientRequest.bearerToken(r, Redacted.value(options.apiKey))
        if (options.headers !== undefined) r = HttpClientRequest.setHeaders(r, options.headers)
        return r
      }),
      options.transformClient ?? ((c) => c)
    )
    const client = HttpClient.filterStatusOk(base)

    const body = (providerOptions: LanguageModel.ProviderOptions, stream: boolean) =>
      Effect.map(Effect.serviceOption(Config), (override) => ({
        model: options.model,
        ...options.config,
        ...(override._tag === "Some" ? override.value : {}),
        messages: toMessages(providerOptions.prompt),
        ...toolFields(providerOptions),
        ...(stream
          ? { stream: true, ...(options.streamUsage === false ? {} : { stream_options: { include_usage: true } }) }
          : {})
      }))

    const request = (payload: unknown) =>
      HttpClientRequest.post("/chat/completions", { body: HttpBody.unsafeJson(payload) })

    const mapErrors =
      (method: string) =>
      <A>(effect: Effect.Effect<A, HttpClientError.HttpClientError>): Effect.Effect<A, AiError.AiError> =>
        Effect.catchTags(effect, {
          RequestError: (error) => Effect.fail(AiError.HttpRequestError.fromRequestError({ module, method, error })),
          ResponseError: (error) => AiError.HttpResponseError.fromResponseError({ module, method, error })
        })

    const generateText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, false)
        const json = yield* client.execute(request(payload)).pipe(
          Effect.flatMap((response: HttpClientResponse.HttpClientResponse) => response.json),
          mapErrors("generateText")
        )
        return yield* fromCompletion(provider, json)
      })

    const streamText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, true)
        const ids = yield* IdGenerator.IdGenerator
        const assembler = new StreamAssembler(provider, ids)
        const events = client.execute(request(payload)).pipe(
          Effect.map((response) => response.stream),
          Stream.unwrap,
          Stream.decodeText(),
          Stream.pipeThroughChannel(Sse.makeChannel()),
          Stream.catchTags({
            RequestError: (error) =>
              Stream.fail(AiError.HttpRequestError.fromRequestError({ module, method: "streamText", error })),
            ResponseError: (error) =>
              Stream.fromEffect(AiError.HttpResponseError.fromResponseError({ module, method: "streamText", error }))
          })
        )
        return events.pipe(
          Stream.takeUntil((event) => event.data.trim() === "[DONE]"),
          Stream.mapEffect((event) => assembler.chunk(event.data)),
          Stream.flattenIterables,
          Stream.concat(
            Stream.suspend(() =>
              assembler.complete
                ? Stream.flattenIterables(Stream.fromEffect(assembler.finish()))
                : Stream.fail(
                    new AiError.MalformedOutput({
                      module,
                      method: "streamText",
                      description: `the connection to ${provider} closed before the response was complete.`
                    })
                  )
            )
          )
        )
      }).pipe(Stream.unwrap)

    return yield* LanguageModel.make({ generateText, streamText })
  })

/** The adapter as a layer. */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient> =>
  Layer.effect(LanguageModel.LanguageModel, make(options))
