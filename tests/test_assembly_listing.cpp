// The PTX / SASS listing logic behind `lab source --entry/--interleave` and the viewer's highlighting, on
// listings written by NVCC 13.0 (-lineinfo -ptx) and nvdisasm 13.5 (-c -g) for a two-kernel module: a
// template kernel calling an inlined header function, and an extern "C" kernel.
#include <catch2/catch.hpp>

#include "nvrtc_runtime/assembly_listing.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace {

const char* const kPtx = R"(.version 9.0
.target sm_90
.address_size 64

	// .globl	plain

.visible .entry plain(
	.param .u64 plain_param_0
)
{
	.reg .b64 	%rd<5>;
	.loc	1 7 0
	ld.param.u64 	%rd1, [plain_param_0];
	.loc	1 7 41
	ret;

}
	// .globl	_Z5scaleILi3EEvPfi
.visible .entry _Z5scaleILi3EEvPfi(
	.param .u64 _Z5scaleILi3EEvPfi_param_0,
	.param .u32 _Z5scaleILi3EEvPfi_param_1
)
{
	.reg .pred 	%p<2>;
	.loc	1 4 3
	mov.u32 	%r3, %ctaid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	.loc	1 5 3
	ld.global.f32 	%f1, [%rd4];
	.loc	2 2 3, function_name $L__info_string0, inlined_at 1 5 3
	add.f32 	%f2, %f1, %f1;
	.loc	1 5 3
	st.global.f32 	[%rd4], %f3;
	ret;

}
	.file	1 "k.cu"
	.file	2 "h.cuh"
)";

const char* const kSass = R"(	.elftype	@"ET_EXEC"


//--------------------- .text._Z5scaleILi3EEvPfi  --------------------------
	.section	.text._Z5scaleILi3EEvPfi,"ax",@progbits
_Z5scaleILi3EEvPfi:
	//## File "k.cu", line 4
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0040*/                   IMAD R5, R5, UR4, R0 ;
	//## File "h.cuh", line 2
        /*00c0*/                   FADD R0, R0, R0 ;
	//## File "k.cu", line 5
        /*00d0*/                   FMUL R5, R0, 3 ;
.L_x_5:


//--------------------- .text.plain               --------------------------
	.section	.text.plain,"ax",@progbits
plain:
	//## File "k.cu", line 7
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0080*/                   EXIT ;


//--------------------- SYMBOLS --------------------------
	.type		.nv.reservedSmem.offset0,@object
)";

std::vector<std::string> lines_of(const lab::AssemblyListing& l, const std::vector<size_t>& indices) {
  std::vector<std::string> out;
  for (size_t i : indices) out.push_back(l.lines[i]);
  return out;
}

std::string read_toy_source(const std::string& file) {
  if (file == "k.cu") return "#include \"h.cuh\"\nL2\nL3\n  int i = f();\n  x[i] = twice(x[i]) * N;\nL6\nplain();\n";
  if (file == "h.cuh") return "float twice(float v) {\n  return v * 2.0f;\n}\n";
  return "";
}

}  // namespace

TEST_CASE("demangle gives the C++ name and leaves extern C names alone", "[listing]") {
  CHECK(lab::demangle("_Z5scaleILi3EEvPfi") == "void scale<3>(float*, int)");
  CHECK(lab::demangle("plain") == "plain");
}

TEST_CASE("PTX: entries, their lines, and the source line of each instruction from .loc/.file", "[listing]") {
  const lab::AssemblyListing module = lab::parse_ptx(kPtx);
  REQUIRE(module.entries.size() == 2);
  CHECK(module.entries[0].mangled == "plain");
  CHECK(module.entries[1].demangled == "void scale<3>(float*, int)");

  // Found by mangled name, by demangled name, by the name without return type and parameters, and by the
  // name alone since one entry has it.
  for (const char* name : {"_Z5scaleILi3EEvPfi", "void scale<3>(float*, int)", "scale<3>", "scale"})
    CHECK(lab::find_entry(module, name).mangled == "_Z5scaleILi3EEvPfi");
  CHECK_THROWS_AS(lab::find_entry(module, "scale<4>"), lab::UsageError);
  CHECK_THROWS_WITH(lab::find_entry(module, "nope"), "--entry 'nope' names no entry point (entries: plain, scale<3>)");

  const lab::AssemblyListing scale = lab::entry_listing(module, lab::find_entry(module, "scale"));
  CHECK(scale.lines.front() == ".visible .entry _Z5scaleILi3EEvPfi(");
  CHECK(scale.lines.back() == "}");
  CHECK(scale.lines.size() == 18);

  // Line 5 of k.cu made the load and the store; the inlined add came from line 2 of the header.
  CHECK(lines_of(scale, lab::lines_from(scale, {"k.cu", 5})) ==
        std::vector<std::string>{"\tld.global.f32 \t%f1, [%rd4];", "\tst.global.f32 \t[%rd4], %f3;", "\tret;"});
  CHECK(lines_of(scale, lab::lines_from(scale, {"h.cuh", 2})) ==
        std::vector<std::string>{"\tadd.f32 \t%f2, %f1, %f1;"});
  CHECK(lab::lines_from(scale, {"k.cu", 7}).empty());  // plain's line: not in this entry
}

TEST_CASE("PTX interleaved: each source line, then the instructions generated from it", "[listing]") {
  const lab::AssemblyListing module = lab::parse_ptx(kPtx);
  const lab::ReadSource read = read_toy_source;
  const std::string text = lab::render_listing(lab::entry_listing(module, lab::find_entry(module, "plain")), &read);
  CHECK(text ==
        "// plain\n"
        ".visible .entry plain(\n"
        "\t.param .u64 plain_param_0\n"
        ")\n"
        "{\n"
        "\t.reg .b64 \t%rd<5>;\n"
        "// k.cu:7: plain();\n"
        "\tld.param.u64 \t%rd1, [plain_param_0];\n"
        "\tret;\n"
        "\n"
        "}\n");
  // Without a source reader: the lines as they are, each entry headed by its demangled name.
  const std::string plain = lab::render_listing(module);
  CHECK(plain.find("// void scale<3>(float*, int)\n.visible .entry _Z5scaleILi3EEvPfi(") != std::string::npos);
  CHECK(plain.find("\t.loc\t1 7 41\n") != std::string::npos);
}

TEST_CASE("SASS: entries per .text section and source lines from nvdisasm -g", "[listing]") {
  const lab::AssemblyListing module = lab::parse_sass(kSass);
  REQUIRE(module.entries.size() == 2);
  CHECK(module.entries[1].mangled == "plain");
  const lab::AssemblyListing scale = lab::entry_listing(module, lab::find_entry(module, "scale<3>"));
  CHECK(lines_of(scale, lab::lines_from(scale, {"h.cuh", 2})) ==
        std::vector<std::string>{"        /*00c0*/                   FADD R0, R0, R0 ;"});
  const lab::ReadSource read = read_toy_source;
  const std::string text = lab::render_listing(scale, &read);
  CHECK(text.find("// k.cu:4:   int i = f();\n        /*0010*/                   S2R R0, SR_TID.X ;\n") !=
        std::string::npos);
  CHECK(text.find("// h.cuh:2:   return v * 2.0f;\n        /*00c0*/") != std::string::npos);
  CHECK(text.find("//## File") == std::string::npos);
  CHECK(text.find("SYMBOLS") == std::string::npos);
}

TEST_CASE("file names of the compile's working directory become kernel-tree paths", "[listing]") {
  lab::AssemblyListing l;
  l.where = {{"/tmp/run/detect/k.cu", 4}, {"/tmp/run/xdetect/q.cu", 4}, {"k.cu", 1}, {"", 0}};
  lab::use_tree_paths(l, {"k.cu", "detect/k.cu", "detect/q.cu"});
  CHECK(l.where ==
        std::vector<lab::SourceLine>{{"detect/k.cu", 4}, {"/tmp/run/xdetect/q.cu", 4}, {"k.cu", 1}, {"", 0}});
}

TEST_CASE("PTX: a device function that was not inlined (.func) has line information but is no entry", "[listing]") {
  // NVCC 13.0 -lineinfo for a __noinline__ function called by one kernel (blank lines dropped).
  const lab::AssemblyListing module = lab::parse_ptx(R"(.func  (.param .b32 func_retval0) _Z4slowf(
	.param .b32 _Z4slowf_param_0
)
;
.func  (.param .b32 func_retval0) _Z4slowf(
	.param .b32 _Z4slowf_param_0
)
{
	.loc	1 1 0
	ld.param.f32 	%f1, [_Z4slowf_param_0];
	.loc	1 2 3
	mul.f32 	%f2, %f1, 0f40400000;
	ret;
}
.visible .entry callf(
	.param .u64 callf_param_0
)
{
	.loc	1 5 3
	{ // callseq 0, 0
	call.uni (retval0), 
	_Z4slowf, 
	} // callseq 0
	.loc	1 6 1
	ret;
}
	.file	1 "f.cu"
)");
  REQUIRE(module.entries.size() == 1);
  CHECK(module.entries[0].mangled == "callf");
  CHECK(module.entries[0].first == 14);
  CHECK(module.entries[0].last == 26);  // one past its closing brace
  CHECK(lines_of(module, lab::lines_from(module, {"f.cu", 2})) ==
        std::vector<std::string>{"\tmul.f32 \t%f2, %f1, 0f40400000;", "\tret;"});
  CHECK(lines_of(module, lab::lines_from(module, {"f.cu", 5})) ==
        std::vector<std::string>{"\t{ // callseq 0, 0", "\tcall.uni (retval0), ", "\t_Z4slowf, ",
                                 "\t} // callseq 0"});
}
