/**
 * What the providers spoken directly (Chat Completions, Anthropic Messages, Gemini) share on the wire:
 * HTTP client errors mapped to @effect/ai's `AiError`s, and a response body read as server-sent events.
 *
 * @example
 * ```ts
 * const json = client.execute(request).pipe(Effect.flatMap((r) => r.json), mapHttpErrors(module, "generateText"))
 * const events = sseEvents(client.execute(request), module) // Stream<Sse.Event, AiError>
 * ```
 */
import { AiError } from "@effect/ai"
import * as Sse from "@effect/experimental/Sse"
import type { HttpClientError, HttpClientResponse } from "@effect/platform"
import { Effect, Stream } from "effect"

/** Maps an HTTP client's request and response errors to @effect/ai's, naming the module and method. */
export const mapHttpErrors =
  (module: string, method: string) =>
  <A, R>(effect: Effect.Effect<A, HttpClientError.HttpClientError, R>): Effect.Effect<A, AiError.AiError, R> =>
    Effect.catchTags(effect, {
      RequestError: (error) => Effect.fail(AiError.HttpRequestError.fromRequestError({ module, method, error })),
      ResponseError: (error) => AiError.HttpResponseError.fromResponseError({ module, method, error })
    })

/** The response's body as server-sent events, its HTTP errors mapped as `streamText`'s. */
export const sseEvents = <R>(
  response: Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError, R>,
  module: string
): Stream.Stream<Sse.Event, AiError.AiError, R> =>
  response.pipe(
    Effect.map((r) => r.stream),
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
