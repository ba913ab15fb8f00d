/**
 * The JSON body of a streaming request of the `@effect/ai` provider clients (Anthropic Messages,
 * OpenAI Responses) sent as text, as the previous provider paths sent it: the reference paths in
 * `legacyAnthropic.ts` and `legacyOpenAi.ts` use it, so the byte-for-byte comparisons in the
 * `*-wire` tests compare against what those paths put on the wire.
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
