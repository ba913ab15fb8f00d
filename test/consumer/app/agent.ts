/**
 * A custom agent with the Effect API: the session runtime over the file log, a model from a
 * provider/model string (an OpenAI-compatible server), the coding tools and a skill plugin. Runs
 * a session, replays it with verify, resumes it with one more input and verifies again.
 */
import { Models } from "@musekit/models"
import { HttpClientNode, SessionRuntime } from "@musekit/node"
import { Effect, Layer, Option } from "effect"
import * as Shout from "./plugin.js"

const [root, state, baseUrl] = process.argv.slice(2) as [string, string, string]
const session = "consumer-effect"
const model = "openai-compatible/fake-model"
const languageModel = Models.layerWithoutHttpClient(model, { baseUrl, apiKey: "sk-fake", env: {} }).pipe(
  Layer.provide(HttpClientNode.layerWith({ userAgent: "consumer-effect/1.0" })),
  Layer.orDie
)
const plugins = [Shout.make()]

const io = (inputs: Array<string>): SessionRuntime.Io => ({
  input: Effect.sync(() => Option.fromNullable(inputs.shift())),
  prompter: { ask: () => Effect.succeed({ allow: false, scope: "once" }) }
})

const program = Effect.gen(function* () {
  const first = yield* SessionRuntime.start({
    config: SessionRuntime.config({ root, model, crew: false, plugins: ["shout"] }),
    session,
    io: io(["What does the README say?", "/shout hello there"]),
    services: { languageModel, plugins },
    dir: state
  })
  const replayed = yield* SessionRuntime.replay({ session, dir: state, verify: true, plugins })
  const resumed = yield* SessionRuntime.resume({
    session,
    io: io(["And once more?"]),
    services: { languageModel, plugins },
    dir: state
  })
  const again = yield* SessionRuntime.replay({ session, dir: state, verify: true, plugins })
  return {
    turns: first.turns.map((t) => t.text),
    replayed,
    resumedTurns: resumed.turns.map((t) => t.text),
    again
  }
})

Effect.runPromise(program).then(
  (r) => console.log(JSON.stringify(r)),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
