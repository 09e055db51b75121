-- Wireshark / tshark dissector for dimmnet frames: Ethernet II frames with
-- EtherType 0x88B5 carrying the 64-byte little-endian dimmnet header and
-- PayloadLen bytes of payload. The layout is docs/wire.md; the reference
-- implementation is vdev/wire (Go).
--
-- Use:   tshark -X lua_script:/path/to/dimmnet.lua -r capture.pcap -V
--        wireshark -X lua_script:/path/to/dimmnet.lua capture.pcap
-- or copy this file to ~/.local/lib/wireshark/plugins/. See docs/wire.md,
-- "Capturing and decoding".
-- Display filters use the abbreviations below, e.g.
--        dimmnet.type == 2 && dimmnet.flags.last == 1
--        dimmnet.checksum.status == 0     (bad CRC32C)

local dimmnet = Proto("dimmnet", "dimmnet RDMA")

local types = {
    [1] = "PUSH", [2] = "IPUSH", [3] = "PULLREQ",
    [4] = "PULLRESP", [5] = "ACK", [6] = "NACK",
}

local f = dimmnet.fields
f.version     = ProtoField.uint8("dimmnet.version", "Version", base.DEC)
f.type        = ProtoField.uint8("dimmnet.type", "Type", base.DEC, types)
f.flags       = ProtoField.uint16("dimmnet.flags", "Flags", base.HEX)
-- Flag bits, in the order of vdev/wire (bit 0 first).
local flagbits = {
    { "pkt_status", "PktStatus", 0x0001 },
    { "last",       "Last",      0x0002 },
    { "first",      "First",     0x0004 },
    { "direct_amt", "DirectAMT", 0x0008 },
    { "crc",        "CRC",       0x0010 },
    { "hold",       "Hold",      0x0020 },
    { "ack_valid",  "AckValid",  0x0040 },
    { "signal",     "Signal",    0x0080 },
    { "seq",        "Seq",       0x0100 },
}
local flagfields = {}
for i, b in ipairs(flagbits) do
    local pf = ProtoField.bool("dimmnet.flags." .. b[1], b[2], 16, nil, b[3])
    f["flag_" .. b[1]] = pf
    flagfields[i] = pf
end
f.src_node    = ProtoField.uint16("dimmnet.src_node", "Source node", base.DEC)
f.dst_node    = ProtoField.uint16("dimmnet.dst_node", "Destination node", base.DEC)
f.src_proc    = ProtoField.uint32("dimmnet.src_proc", "Source process", base.DEC)
f.dst_proc    = ProtoField.uint32("dimmnet.dst_proc", "Destination process (or AMT entry)", base.DEC)
f.seq         = ProtoField.uint32("dimmnet.seq", "Sequence number", base.DEC)
f.ack         = ProtoField.uint32("dimmnet.ack", "Cumulative ack", base.DEC)
f.msg_id      = ProtoField.uint32("dimmnet.msg_id", "Message id", base.DEC)
f.offset      = ProtoField.uint32("dimmnet.offset", "Offset in message", base.DEC)
f.msg_len     = ProtoField.uint32("dimmnet.msg_len", "Message length", base.DEC)
f.payload_len = ProtoField.uint32("dimmnet.payload_len", "Payload length", base.DEC)
f.addr        = ProtoField.uint64("dimmnet.addr", "Address", base.HEX)
f.imm         = ProtoField.uint64("dimmnet.imm", "Immediate", base.HEX)
f.code        = ProtoField.uint16("dimmnet.code", "Code", base.DEC)
f.reserved    = ProtoField.uint16("dimmnet.reserved", "Reserved", base.HEX)
f.checksum    = ProtoField.uint32("dimmnet.checksum", "Checksum (CRC32C)", base.HEX)
f.checksum_status = ProtoField.uint8("dimmnet.checksum.status", "Checksum status", base.DEC,
    { [0] = "Bad", [1] = "Good", [2] = "Unverified" })
f.payload     = ProtoField.bytes("dimmnet.payload", "Payload")

local ef_version  = ProtoExpert.new("dimmnet.bad_version", "Unsupported dimmnet version", expert.group.MALFORMED, expert.severity.ERROR)
local ef_type     = ProtoExpert.new("dimmnet.bad_type", "Unknown dimmnet packet type", expert.group.MALFORMED, expert.severity.ERROR)
local ef_short    = ProtoExpert.new("dimmnet.short", "PayloadLen exceeds the captured bytes", expert.group.MALFORMED, expert.severity.ERROR)
local ef_checksum = ProtoExpert.new("dimmnet.bad_checksum", "CRC32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
dimmnet.experts = { ef_version, ef_type, ef_short, ef_checksum }

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as in Go's
-- crc32.MakeTable(crc32.Castagnoli).
local bit = bit32 or bit
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local crctab = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    crctab[i] = c
end
local function crc32c_update(crc, bytes)
    for i = 0, bytes:len() - 1 do
        crc = bxor(rshift(crc, 8), crctab[band(bxor(crc, bytes:get_index(i)), 0xff)])
    end
    return crc
end

local HEADER_LEN = 64

function dimmnet.dissector(tvb, pinfo, tree)
    if tvb:len() < HEADER_LEN then
        return 0
    end
    pinfo.cols.protocol = "DIMMNET"
    local plen = tvb(36, 4):le_uint()
    local avail = tvb:len() - HEADER_LEN
    local shown = math.min(plen, avail)
    local t = tree:add(dimmnet, tvb(0, HEADER_LEN + shown))

    local ver = tvb(0, 1):uint()
    local vi = t:add_le(f.version, tvb(0, 1))
    if ver ~= 1 then vi:add_proto_expert_info(ef_version) end
    local ty = tvb(1, 1):uint()
    local ti = t:add_le(f.type, tvb(1, 1))
    if not types[ty] then ti:add_proto_expert_info(ef_type) end

    local flags = tvb(2, 2):le_uint()
    local names = {}
    for _, b in ipairs(flagbits) do
        if band(flags, b[3]) ~= 0 then names[#names + 1] = b[2] end
    end
    local fi = t:add_le(f.flags, tvb(2, 2))
    fi:append_text(" (" .. (#names > 0 and table.concat(names, "|") or "none") .. ")")
    for _, pf in ipairs(flagfields) do
        fi:add_le(pf, tvb(2, 2))
    end

    t:add_le(f.src_node, tvb(4, 2))
    t:add_le(f.dst_node, tvb(6, 2))
    t:add_le(f.src_proc, tvb(8, 4))
    t:add_le(f.dst_proc, tvb(12, 4))
    t:add_le(f.seq, tvb(16, 4))
    t:add_le(f.ack, tvb(20, 4))
    t:add_le(f.msg_id, tvb(24, 4))
    t:add_le(f.offset, tvb(28, 4))
    t:add_le(f.msg_len, tvb(32, 4))
    local pi = t:add_le(f.payload_len, tvb(36, 4))
    t:add_le(f.addr, tvb(40, 8))
    t:add_le(f.imm, tvb(48, 8))
    t:add_le(f.code, tvb(56, 2))
    t:add_le(f.reserved, tvb(58, 2))
    local ci = t:add_le(f.checksum, tvb(60, 4))

    local status = 2
    if plen > avail then
        pi:add_proto_expert_info(ef_short)
    elseif band(flags, 0x0010) ~= 0 then
        -- Header with the checksum field as zero, then the payload.
        local crc = 0xFFFFFFFF
        crc = crc32c_update(crc, tvb(0, 60):bytes())
        crc = crc32c_update(crc, ByteArray.new("00000000"))
        if plen > 0 then crc = crc32c_update(crc, tvb(HEADER_LEN, plen):bytes()) end
        crc = bxor(crc, 0xFFFFFFFF)
        if crc == tvb(60, 4):le_uint() then
            status = 1
        else
            status = 0
            ci:append_text(string.format(" [incorrect, should be 0x%08x]", crc))
            ci:add_proto_expert_info(ef_checksum)
        end
    end
    t:add(f.checksum_status, tvb(60, 4), status):set_generated()

    if shown > 0 then
        t:add(f.payload, tvb(HEADER_LEN, shown))
    end

    local tname = types[ty] or string.format("Type(%d)", ty)
    local info = string.format("%s %d>%d seq=%d", tname,
        tvb(4, 2):le_uint(), tvb(6, 2):le_uint(), tvb(16, 4):le_uint())
    if band(flags, 0x0040) ~= 0 then info = info .. string.format(" ack=%d", tvb(20, 4):le_uint()) end
    info = info .. string.format(" msg=%d off=%d/%d len=%d", tvb(24, 4):le_uint(),
        tvb(28, 4):le_uint(), tvb(32, 4):le_uint(), plen)
    if #names > 0 then info = info .. " [" .. table.concat(names, "|") .. "]" end
    if status == 0 then info = info .. " [BAD CRC]" end
    pinfo.cols.info = info
    return HEADER_LEN + shown
end

DissectorTable.get("ethertype"):add(0x88B5, dimmnet)
