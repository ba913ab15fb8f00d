/**
 * A Gemini model from `@musekit/models/google` with no provider package installed: one answer
 * whole, one streamed, against a server speaking Gemini's generateContent.
 */
import { LanguageModel } from "@effect/ai"
import * as Google from "@musekit/models/google"
import { Chunk, Effect, Stream } from "effect"

const [baseUrl] = process.argv.slice(2) as [string]
const gemini = Google.layer("gemini-2.5-flash", { baseUrl, env: { GEMINI_API_KEY: "gemini-fake" }, maxRetries: 0 })

const program = Effect.gen(function* () {
  const whole = yield* LanguageModel.generateText({ prompt: "Say hello" })
  const parts = yield* LanguageModel.streamText({ prompt: "Say hello" }).pipe(Stream.runCollect)
  const streamed = Chunk.toArray(parts)
    .flatMap((p) => (p.type === "text-delta" ? [p.delta] : []))
    .join("")
  return { text: whole.text, outputTokens: whole.usage.outputTokens, streamed }
})

console.log(JSON.stringify(await Effect.runPromise(program.pipe(Effect.provide(gemini)))))
