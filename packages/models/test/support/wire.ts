/**
 * What the providers' streaming endpoints send, as SSE events for `FakeServer.sse`: a text answer
 * or one tool call, in each of the three wire formats MuseKit speaks over HTTP: Chat Completions
 * (`POST /v1/chat/completions`), Anthropic Messages (`POST /v1/messages`) and OpenAI Responses
 * (`POST /v1/responses`). Also how many tool results a request carries, which is how a scripted
 * server knows which turn it is answering.
 *
 * @example
 * ```ts
 * import * as Fake from "./FakeServer.js"
 * import * as Wire from "./wire.js"
 *
 * server.reply(Fake.sse(Wire.chat.toolCall({ id: "call_1", name: "read_file", args: { path: "README.md" } })))
 * server.reply(Fake.sse(Wire.anthropic.text("Done.")))
 * ```
 */
import type { SseEvent } from "./FakeServer.js"

export type Format = "chat" | "anthropic" | "responses"

export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly args: unknown
}

export interface Usage {
  readonly input: number
  readonly output: number
  readonly cached?: number | undefined
}

/** The answer's id (a response id for the Responses API), model and token usage. */
export interface Options {
  readonly id?: string | undefined
  readonly model?: string | undefined
  readonly usage?: Usage | undefined
}

const defaultUsage: Usage = { input: 50, output: 10 }

// ---------------------------------------------------------------------------------------------
// Chat Completions (https://platform.openai.com/docs/api-reference/chat-streaming)

const chatChunk = (model: string, delta: Record<string, unknown>, finish_reason: string | null = null) => ({
  data: {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 1741570283,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason }]
  }
})

const chatUsage = (model: string, u: Usage) => ({
  data: {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 1741570283,
    model,
    choices: [],
    usage: {
      prompt_tokens: u.input,
      completion_tokens: u.output,
      total_tokens: u.input + u.output,
      ...(u.cached !== undefined ? { prompt_tokens_details: { cached_tokens: u.cached } } : {})
    }
  }
})

export const chat = {
  text: (text: string, { model = "fake-model", usage: u = defaultUsage }: Options = {}): Array<SseEvent> => [
    chatChunk(model, { role: "assistant", content: "" }),
    chatChunk(model, { content: text }),
    chatChunk(model, {}, "stop"),
    chatUsage(model, u),
    { data: "[DONE]" }
  ],
  toolCall: (call: ToolCall, { model = "fake-model", usage: u = defaultUsage }: Options = {}): Array<SseEvent> => [
    chatChunk(model, { role: "assistant", content: null }),
    chatChunk(model, {
      tool_calls: [{ index: 0, id: call.id, type: "function", function: { name: call.name, arguments: "" } }]
    }),
    chatChunk(model, { tool_calls: [{ index: 0, function: { arguments: JSON.stringify(call.args) } }] }),
    chatChunk(model, {}, "tool_calls"),
    chatUsage(model, u),
    { data: "[DONE]" }
  ],
  /** Tool results in a request body. */
  toolResults: (body: any): number =>
    Array.isArray(body?.messages) ? body.messages.filter((m: any) => m?.role === "tool").length : 0,
  toolNames: (body: any): Array<string> =>
    Array.isArray(body?.tools) ? body.tools.map((t: any) => t?.function?.name ?? t?.name) : []
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages (https://docs.anthropic.com/en/docs/build-with-claude/streaming)

const anthropicStart = (model: string, u: Usage) => ({
  event: "message_start",
  data: {
    type: "message_start",
    message: {
      id: "msg_fake",
      type: "message",
      role: "assistant",
      content: [],
      model,
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: u.input,
        output_tokens: 1,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: u.cached ?? 0
      }
    }
  }
})

const anthropicEnd = (stop_reason: string, u: Usage) => [
  {
    event: "message_delta",
    data: { type: "message_delta", delta: { stop_reason, stop_sequence: null }, usage: { output_tokens: u.output } }
  },
  { event: "message_stop", data: { type: "message_stop" } }
]

export const anthropic = {
  text: (text: string, { model = "claude-sonnet-4-5", usage: u = defaultUsage }: Options = {}): Array<SseEvent> => [
    anthropicStart(model, u),
    {
      event: "content_block_start",
      data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
    },
    {
      event: "content_block_delta",
      data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }
    },
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
    ...anthropicEnd("end_turn", u)
  ],
  toolCall: (
    call: ToolCall,
    { model = "claude-sonnet-4-5", usage: u = defaultUsage }: Options = {}
  ): Array<SseEvent> => [
    anthropicStart(model, u),
    {
      event: "content_block_start",
      data: {
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_use", id: call.id, name: call.name, input: {} }
      }
    },
    {
      event: "content_block_delta",
      data: {
        type: "content_block_delta",
        index: 0,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(call.args) }
      }
    },
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
    ...anthropicEnd("tool_use", u)
  ],
  toolResults: (body: any): number => {
    let n = 0
    for (const m of Array.isArray(body?.messages) ? body.messages : []) {
      if (Array.isArray(m?.content)) for (const c of m.content) if (c?.type === "tool_result") n++
    }
    return n
  },
  toolNames: (body: any): Array<string> => (Array.isArray(body?.tools) ? body.tools.map((t: any) => t?.name) : [])
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses (https://platform.openai.com/docs/api-reference/responses-streaming)

const responseObject = (id: string, model: string, output: Array<unknown>, status: string, u: Usage | null) => ({
  id,
  object: "response",
  created_at: 1741476542,
  status,
  error: null,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  model,
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: 1.0,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1.0,
  truncation: "disabled",
  usage:
    u === null
      ? null
      : {
          input_tokens: u.input,
          input_tokens_details: { cached_tokens: u.cached ?? 0 },
          output_tokens: u.output,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: u.input + u.output
        },
  user: null,
  metadata: {}
})

const responsesEvents = (
  id: string,
  model: string,
  item: any,
  middle: Array<[string, Record<string, unknown>]>,
  u: Usage
) => {
  let seq = 0
  const ev = (type: string, data: Record<string, unknown>) => ({
    event: type,
    data: { type, sequence_number: seq++, ...data }
  })
  return [
    ev("response.created", { response: responseObject(id, model, [], "in_progress", null) }),
    ev("response.in_progress", { response: responseObject(id, model, [], "in_progress", null) }),
    ev("response.output_item.added", { output_index: 0, item: { ...item.added } }),
    ...middle.map(([type, data]) => ev(type, data)),
    ev("response.output_item.done", { output_index: 0, item: item.done }),
    ev("response.completed", { response: responseObject(id, model, [item.done], "completed", u) })
  ]
}

export const responses = {
  text: (text: string, options: Options = {}): Array<SseEvent> => {
    const message = (t: string, status: string) => ({
      id: "msg_fake",
      type: "message",
      status,
      role: "assistant",
      content: t === "" ? [] : [{ type: "output_text", text: t, annotations: [] }]
    })
    const part = (t: string) => ({ type: "output_text", text: t, annotations: [] })
    const at = { item_id: "msg_fake", output_index: 0, content_index: 0 }
    return responsesEvents(
      options.id ?? "resp_fake",
      options.model ?? "gpt-4.1",
      { added: message("", "in_progress"), done: message(text, "completed") },
      [
        ["response.content_part.added", { ...at, part: part("") }],
        ["response.output_text.delta", { ...at, delta: text, logprobs: [] }],
        ["response.output_text.done", { ...at, text, logprobs: [] }],
        ["response.content_part.done", { ...at, part: part(text) }]
      ],
      options.usage ?? defaultUsage
    )
  },
  toolCall: (call: ToolCall, options: Options = {}): Array<SseEvent> => {
    const args = JSON.stringify(call.args)
    const item = (a: string, status: string) => ({
      type: "function_call",
      id: `fc_${call.id}`,
      call_id: call.id,
      name: call.name,
      arguments: a,
      status
    })
    return responsesEvents(
      options.id ?? "resp_fake",
      options.model ?? "gpt-4.1",
      { added: item("", "in_progress"), done: item(args, "completed") },
      [
        ["response.function_call_arguments.delta", { item_id: `fc_${call.id}`, output_index: 0, delta: args }],
        ["response.function_call_arguments.done", { item_id: `fc_${call.id}`, output_index: 0, arguments: args }]
      ],
      options.usage ?? defaultUsage
    )
  },
  toolResults: (body: any): number =>
    Array.isArray(body?.input) ? body.input.filter((i: any) => i?.type === "function_call_output").length : 0,
  toolNames: (body: any): Array<string> => (Array.isArray(body?.tools) ? body.tools.map((t: any) => t?.name) : [])
}

/** The builders of one format. */
export const of = (format: Format) => (format === "chat" ? chat : format === "anthropic" ? anthropic : responses)
