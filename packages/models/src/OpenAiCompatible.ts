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
 *
 * // the window the server runs the model with, where it says (vLLM, llama.cpp, Ollama, LM Studio, OpenRouter)
 * const window = OpenAiCompatible.contextWindow({ model: "qwen3-coder", apiUrl: "http://127.0.0.1:8000/v1", provider: "vllm" })
 * // Effect<Option<{ tokens: 262144, source: "http://127.0.0.1:8000/v1/models (max_model_len)" }>, never, HttpClient>
 * ```
 */
import { AiError, IdGenerator, LanguageModel } from "@effect/ai"
import { HttpBody, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Context, Duration, Effect, Layer, Option, Redacted, Stream } from "effect"
import {
  fromCompletion,
  messagesParts,
  requestPieces,
  StreamAssembler,
  toolFields
} from "./internal/chatCompletions.js"
import { mapHttpErrors, sseEvents } from "./internal/http.js"
import { bytesOf } from "./internal/joinJson.js"

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

    // the request's JSON bytes, with each history message encoded once per session (not once per request)
    const body = (providerOptions: LanguageModel.ProviderOptions, stream: boolean) =>
      Effect.map(Effect.serviceOption(Config), (override) =>
        requestPieces(
          { model: options.model, ...options.config, ...(override._tag === "Some" ? override.value : {}) },
          messagesParts(providerOptions.prompt),
          {
            ...toolFields(providerOptions),
            // (`stream` last: `HttpPolicy.isStreamingRequest` sees it there without reading the body)
            ...(stream
              ? { ...(options.streamUsage === false ? {} : { stream_options: { include_usage: true } }), stream: true }
              : {})
          }
        )
      )

    const request = (pieces: ReadonlyArray<string>) =>
      HttpClientRequest.post("/chat/completions", { body: HttpBody.uint8Array(bytesOf(pieces), "application/json") })

    const generateText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, false)
        const json = yield* client.execute(request(payload)).pipe(
          Effect.flatMap((response: HttpClientResponse.HttpClientResponse) => response.json),
          mapHttpErrors(module, "generateText")
        )
        return yield* fromCompletion(provider, json)
      })

    const streamText = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function* () {
        const payload = yield* body(providerOptions, true)
        const ids = yield* IdGenerator.IdGenerator
        const assembler = new StreamAssembler(provider, ids)
        return sseEvents(client.execute(request(payload)), module).pipe(
          Stream.takeUntil((event) => event.data.trim() === "[DONE]"),
          Stream.chunks,
          Stream.flatMap((events) =>
            Stream.unwrap(
              Effect.map(assembler.chunks(events), ({ parts, error }) =>
                error === undefined
                  ? Stream.fromChunk(parts)
                  : Stream.concat(Stream.fromChunk(parts), Stream.fail(error))
              )
            )
          ),
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

// ---------------------------------------------------------------------------------------------
// The server's own word on the context window

/** A context window as a server reported it. */
export interface ReportedWindow {
  /** Tokens. */
  readonly tokens: number
  /** Where it came from: the URL and the field, e.g. `http://127.0.0.1:8000/v1/models (max_model_len)`. */
  readonly source: string
}

const positive = (x: unknown): number | undefined =>
  typeof x === "number" && Number.isFinite(x) && x > 0 ? Math.floor(x) : undefined

/** The fields servers use for a model's window in their model lists, best first. */
const listFields: ReadonlyArray<readonly [string, (entry: any) => unknown]> = [
  ["max_model_len", (e) => e?.max_model_len], // vLLM
  ["loaded_context_length", (e) => e?.loaded_context_length], // LM Studio
  ["max_context_length", (e) => e?.max_context_length], // LM Studio
  ["context_length", (e) => e?.context_length], // OpenRouter and others
  ["context_window", (e) => e?.context_window],
  ["meta.n_ctx", (e) => e?.meta?.n_ctx],
  ["meta.n_ctx_train", (e) => e?.meta?.n_ctx_train] // llama.cpp
]

const fromEntry = (entry: unknown, url: string): ReportedWindow | undefined => {
  for (const [field, get] of listFields) {
    const tokens = positive(get(entry))
    if (tokens !== undefined) return { tokens, source: `${url} (${field})` }
  }
  return undefined
}

/** The entry for `model` in a `{ data: [...] }` model list (the only entry, when there is one). */
const entryOf = (list: any, model: string): unknown => {
  const data: Array<any> = Array.isArray(list?.data) ? list.data : Array.isArray(list) ? list : []
  return data.find((e) => e?.id === model) ?? (data.length === 1 ? data[0] : undefined)
}

interface Probe {
  readonly method: "GET" | "POST"
  readonly url: string
  readonly body?: unknown
  readonly read: (json: any, url: string) => ReportedWindow | undefined
}

const probesFor = (provider: string, apiUrl: string, model: string): ReadonlyArray<Probe> => {
  const origin = apiUrl.replace(/\/v1$/, "")
  const models: Probe = { method: "GET", url: `${apiUrl}/models`, read: (j, u) => fromEntry(entryOf(j, model), u) }
  // llama.cpp: the context the server runs with (`-c`), per slot
  const props: Probe = {
    method: "GET",
    url: `${origin}/props`,
    read: (j, u) => {
      const n = positive(j?.default_generation_settings?.n_ctx) ?? positive(j?.n_ctx)
      return n === undefined ? undefined : { tokens: n, source: `${u} (n_ctx)` }
    }
  }
  // Ollama: num_ctx when the model sets one, else the model's own length
  const show: Probe = {
    method: "POST",
    url: `${origin}/api/show`,
    body: { model },
    read: (j, u) => {
      const numCtx = /(?:^|\n)\s*num_ctx\s+(\d+)/.exec(typeof j?.parameters === "string" ? j.parameters : "")
      if (numCtx) return { tokens: Number(numCtx[1]), source: `${u} (num_ctx)` }
      const info = j?.model_info ?? {}
      for (const [k, v] of Object.entries(info)) {
        const n = k.endsWith(".context_length") ? positive(v) : undefined
        if (n !== undefined) return { tokens: n, source: `${u} (${k})` }
      }
      return undefined
    }
  }
  // LM Studio's own REST API
  const lmstudio: Probe = {
    method: "GET",
    url: `${origin}/api/v0/models/${encodeURIComponent(model)}`,
    read: (j, u) => fromEntry(j, u)
  }
  switch (provider) {
    case "ollama":
      return [show]
    case "llamacpp":
      return [props, models]
    case "lmstudio":
      return [lmstudio, models]
    case "vllm":
    case "openrouter":
    case "llama-api":
      return [models]
    default:
      return [models, props]
  }
}

/**
 * The context window the server reports for `model`, where it reports one: vLLM (`max_model_len` in
 * `/v1/models`), llama.cpp (`n_ctx` in `/props`, else `n_ctx_train`), Ollama (`num_ctx` or
 * `<arch>.context_length` from `/api/show`), LM Studio (`/api/v0/models`), OpenRouter
 * (`context_length`). `None` when the server does not say, cannot be reached, or takes longer
 * than `timeout` (default 3 seconds); never fails.
 */
export const contextWindow = (options: {
  readonly model: string
  readonly apiUrl: string
  readonly provider?: string | undefined
  readonly apiKey?: Redacted.Redacted | undefined
  readonly timeout?: Duration.DurationInput | undefined
}): Effect.Effect<Option.Option<ReportedWindow>, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const apiUrl = options.apiUrl.replace(/\/+$/, "")
    for (const probe of probesFor(options.provider ?? "openai-compatible", apiUrl, options.model)) {
      let request =
        probe.method === "GET"
          ? HttpClientRequest.get(probe.url)
          : HttpClientRequest.post(probe.url, { body: HttpBody.unsafeJson(probe.body) })
      request = HttpClientRequest.acceptJson(request)
      if (options.apiKey !== undefined) request = HttpClientRequest.bearerToken(request, Redacted.value(options.apiKey))
      const json = yield* client.execute(request).pipe(
        Effect.flatMap(
          (r): Effect.Effect<unknown, unknown> => (r.status >= 200 && r.status < 300 ? r.json : Effect.fail(r.status))
        ),
        Effect.scoped,
        Effect.option
      )
      const found = Option.isSome(json) ? probe.read(json.value, probe.url) : undefined
      if (found !== undefined) return Option.some(found)
    }
    return Option.none<ReportedWindow>()
  }).pipe(
    Effect.timeoutTo({
      duration: options.timeout ?? Duration.seconds(3),
      onSuccess: (o) => o,
      onTimeout: () => Option.none<ReportedWindow>()
    })
  )
