/**
 * A third-party skill plugin as its author writes it: `/shout <words>` asks the agent to repeat the
 * words and shows the answer in capitals. Compiled with `declaration: true`.
 */
import { Plugin, Skill } from "@musekit/core"
import { Effect } from "effect"

export const shout = Skill.make({
  name: "shout",
  description: "Ask the agent to repeat some words, then show them loudly",
  run: (words) =>
    Effect.gen(function* () {
      const ctx = yield* Skill.SkillContext
      const turn = yield* ctx.agent.send(`repeat: ${words}`, ctx.sendOptions)
      return turn.text.toUpperCase()
    })
})

export const make = () => Plugin.make({ name: "shout", checkpoint: "stateless", skills: [shout] })
