/** The same with the Promise facade: no `effect` import. */
import { createAgent, skill, tool } from "@musekit/node/promise"

const [root, state, baseUrl] = process.argv.slice(2) as [string, string, string]
const wordCount = tool({
  name: "word_count",
  description: "Count the words of a text",
  parameters: { text: { type: "string" } },
  effect: "read",
  run: async ({ text }) => ({ words: text.split(/\s+/).filter(Boolean).length })
})
const whisper = skill({
  name: "whisper",
  description: "Ask the agent to repeat some words, then show them quietly",
  run: async (args, ctx) => (await ctx.send(`repeat: ${args}`)).text.toLowerCase()
})
const options = {
  model: "openai-compatible/fake-model",
  modelOptions: { baseUrl, apiKey: "sk-fake", env: {} },
  dir: root,
  stateDir: state,
  tools: [wordCount],
  skills: [whisper]
}

const main = async () => {
  const agent = createAgent(options)
  const types: Array<string> = []
  const listening = (async () => {
    for await (const e of agent.events()) types.push(e.type)
  })()
  const first = await agent.send("What does the README say?")
  const second = await agent.send("/whisper HELLO There")
  await agent.close()
  await listening
  const replayed = await createAgent({ ...options, session: agent.session }).replay({ verify: true })
  const resumed = createAgent({ ...options, session: agent.session })
  await resumed.resume()
  const third = await resumed.send("And once more?")
  await resumed.close()
  const again = await createAgent({ ...options, session: agent.session }).replay({ verify: true })
  console.log(JSON.stringify({ texts: [first.text, second.text, third.text], events: types.length, replayed, again }))
}
main().catch((e) => {
  console.error(e)
  process.exit(1)
})
