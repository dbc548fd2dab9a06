! The emulated GPU of the tests (emulated_gpu.cpp) and the checks both programs share:
! integer arrays in device memory, filled and read back through copies.
module gpu_buffers
  use, intrinsic :: iso_c_binding
  implicit none
  integer, parameter :: n = 64  ! integers in each device array
  integer, parameter :: sentinel = -7
  interface
    type(c_ptr) function test_gpu_allocate(bytes) bind(C)
      import :: c_ptr, c_int64_t
      integer(c_int64_t), value :: bytes
    end function
    subroutine test_gpu_free(p) bind(C)
      import :: c_ptr
      type(c_ptr), value :: p
    end subroutine
    integer(c_int) function test_gpu_copy(dst, src, bytes) bind(C)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: dst, src
      integer(c_int64_t), value :: bytes
    end function
  end interface
  integer :: failures = 0
contains
  ! A device array of n integers, every one `value`. The pointer is for passing to MPI
  ! only: touching its elements faults, as GPU memory would.
  function device_array(value) result(a)
    integer, intent(in) :: value
    integer, pointer :: a(:)
    integer :: host(n)
    host = value
    call c_f_pointer(test_gpu_allocate(int(4 * n, c_int64_t)), a, [n])
    call upload(a, host)
  end function

  subroutine upload(a, host)
    integer, pointer, intent(in) :: a(:)
    integer, target, intent(in) :: host(n)
    if (test_gpu_copy(c_loc(a(1)), c_loc(host), int(4 * n, c_int64_t)) /= 0) stop 'upload failed'
  end subroutine

  subroutine free_device_array(a)
    integer, pointer :: a(:)
    call test_gpu_free(c_loc(a(1)))
    nullify (a)
  end subroutine

  function download(a) result(host)
    integer, pointer, intent(in) :: a(:)
    integer, target :: host(n)
    if (test_gpu_copy(c_loc(host), c_loc(a(1)), int(4 * n, c_int64_t)) /= 0) stop 'download failed'
  end function

  ! `what` passed when the device array holds 100 + k at every stride-th element from
  ! the first (k = 0, 1, ..., count - 1) and the sentinel everywhere else.
  subroutine check_strided(what, a, stride, count)
    character(*), intent(in) :: what
    integer, pointer, intent(in) :: a(:)
    integer, intent(in) :: stride, count
    integer :: host(n), expect(n), k
    host = download(a)
    expect = sentinel
    do k = 0, count - 1
      expect(1 + k * stride) = 100 + k
    end do
    if (any(host /= expect)) then
      failures = failures + 1
      print '(a, a, 8i5)', 'FAIL: ', what, host(1:8)
    end if
  end subroutine

  function values(count) result(v)
    integer, intent(in) :: count
    integer :: v(count), k
    v = [(100 + k, k = 0, count - 1)]
  end function
end module
