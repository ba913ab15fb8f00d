/**
 * The JSON body of a streaming request of the `@effect/ai` provider clients (Anthropic Messages,
 * OpenAI Responses) sent as text: one `JSON.stringify`, encoded once on the way out. The
 * clients' own `HttpBody.unsafeJson` encodes the text to bytes that `fetch` then copies again —
 * three copies of a request that holds the whole history (100–200 KB in a long session), each
 * turn. `Anthropic.ts` and `OpenAi.ts` replace the clients' streaming calls with the same request
 * (path, headers, event schema, end) carrying this body.
 *
 * @example
 * ```ts
 * HttpClientRequest.post("/v1/messages", { body: jsonText({ ...payload, stream: true }) })
 * ```
 */
import { HttpBody } from "@effect/platform"

/** A JSON body as text (`fetch` encodes it once). */
export const jsonText = (payload: unknown): HttpBody.HttpBody =>
  HttpBody.raw(JSON.stringify(payload), { contentType: "application/json" })
